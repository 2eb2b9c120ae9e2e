"""Ant colony optimisation for the symmetric TSP: one colony, and K colonies on ranks (Chapter 31, Sections 2-7).

From city i an ant moves to an unvisited city j with probability (the random-proportional rule)

    p_ij = tau_ij^mu D_ij^-nu / sum_{l unvisited} tau_il^mu D_il^-nu

(the literature writes alpha, beta and eta = 1/D; the course keeps alpha, beta for the network and eta for a
learning rate). MAX-MIN Ant System (Stuetzle and Hoos 2000, ``aco``): after the tours (and optional 2-opt)
all pheromone evaporates, ONE ant deposits, and the trails are clamped:

    tau_ij <- clip((1 - xi) tau_ij + [ij in T] / ell(T), tau_min, tau_max),
    tau_max = 1 / (xi ell_bs),   tau_min = tau_max (1 - p_best^(1/n)) / ((n/2 - 1) p_best^(1/n)),

with T the iteration-best tour, or the best-so-far one (length ell_bs) every ``bs_every``-th iteration.
``naive_aco`` is Dorigo's Ant System: no bounds, every ant deposits 1 / ell(T_k).

Island model (Middendorf, Reischle and Schmeck 2002): K colonies, one per rank, each with its own stream
(seed, colony); every M iterations they exchange best-so-far tours, over a ring (one message of n int64 and
the length: 8 (n + 1) bytes per colony) or all-to-all (a MINLOC all-reduce of (length, rank), then a
broadcast of the winner's n-city tour), and a colony adopts a strictly shorter tour as its best-so-far. Instances,
tours, 2-opt and the exact Held-Karp reference are in ``tsp``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds, broadcast, tree_allreduce
from .swarm_pso import island_stream
from .tsp import _check_D, canonical_tour, nearest_neighbour_tour, tour_length, two_opt

__all__ = ["ACOParams", "construct_tours", "tau_bounds", "mmas_update", "aco", "naive_aco", "train_aco",
           "reference_aco_colonies", "run_aco", "exchange_messages", "exchange_bytes"]


@dataclass(frozen=True)
class ACOParams:
    """mu, nu: exponents of pheromone and inverse distance; xi: evaporation rate; p_best sets tau_min; the
    best-so-far ant deposits every ``bs_every``-th iteration; ``local_search``: 2-opt every ant's tour."""
    mu: float = 1.0
    nu: float = 2.0
    xi: float = 0.2
    p_best: float = 0.05
    bs_every: int = 5
    local_search: bool = True


def construct_tours(tau: np.ndarray, D: np.ndarray, m: int, params: ACOParams,
                    rng: np.random.RandomState) -> np.ndarray:
    """m tours (m x n, each a permutation) by the random-proportional rule, all ants stepping together."""
    n = len(D)
    W = tau ** params.mu * (D + np.eye(n)) ** -params.nu
    np.fill_diagonal(W, 0.0)  # never stay put
    rows = np.arange(m)
    tours = np.empty((m, n), dtype=np.int64)
    cur = rng.randint(0, n, size=m)  # each ant starts at a random city
    tours[:, 0] = cur
    free = np.ones((m, n), dtype=bool)
    free[rows, cur] = False
    for s in range(1, n):
        w = W[cur] * free
        c = np.cumsum(w, axis=1)
        u = rng.random_sample(m) * c[:, -1]  # a point of [0, total): the next city is where the sum passes it
        hit = (c > u[:, None]) & free
        last_free = n - 1 - np.argmax(free[:, ::-1], axis=1)  # rounding guard: u at the very top
        cur = np.where(hit.any(1), np.argmax(hit, axis=1), last_free)
        tours[:, s] = cur
        free[rows, cur] = False
    return tours


def tau_bounds(best_length: float, n: int, params: ACOParams) -> tuple[float, float]:
    """(tau_min, tau_max) of MMAS: tau_max = 1 / (xi ell_bs); tau_min from p_best (capped at tau_max)."""
    hi = 1.0 / (params.xi * best_length)
    root = params.p_best ** (1.0 / n)
    return min(hi * (1 - root) / ((n / 2 - 1) * root), hi), hi


def _deposit(tau: np.ndarray, tour: np.ndarray, amount: float) -> None:
    nxt = np.roll(tour, -1)
    tau[tour, nxt] += amount
    tau[nxt, tour] += amount  # symmetric TSP: both directions of every edge


def mmas_update(tau: np.ndarray, tour: np.ndarray, length: float, best_length: float,
                params: ACOParams) -> tuple[np.ndarray, float, float]:
    """Evaporate, let one ant (``tour``) deposit 1 / length, clamp to the bounds of ``best_length``."""
    tau = (1.0 - params.xi) * tau
    _deposit(tau, tour, 1.0 / length)
    lo, hi = tau_bounds(best_length, len(tau), params)
    return np.clip(tau, lo, hi), lo, hi


def _check(ants: int, iters: int, every: int, topology: str) -> None:
    if isinstance(ants, bool) or int(ants) != ants or ants < 0 or int(iters) != iters or iters < 0:
        raise ValueError(f"ACO needs ants >= 0 and iters >= 0, got ants={ants!r}, iters={iters!r}")
    if int(every) != every or every < 1:
        raise ValueError(f"the exchange interval M must be an integer >= 1, got {every!r}")
    if topology not in ("ring", "all"):
        raise ValueError(f"unknown exchange topology {topology!r}: choose 'ring' or 'all'")


class _Colony:
    """One MMAS colony: its trails, its best-so-far tour and, per iteration, (tau_min, tau_max, min tau, max tau)."""

    def __init__(self, D: np.ndarray, ants: int, params: ACOParams, seed: int, colony: int) -> None:
        self.D, self.m, self.params, self.rng = D, int(ants), params, island_stream(seed, colony)
        self.best_tour, self.best_len = np.full(len(D), -1, dtype=np.int64), np.inf
        self.tau = np.full(D.shape, tau_bounds(tour_length(nearest_neighbour_tour(D), D), len(D), params)[1])
        self.history: list[float] = []
        self.bounds: list[tuple[float, float, float, float]] = []

    def step(self, t: int) -> None:
        """Build m tours, 2-opt them, update the best, then the MMAS pheromone update."""
        if self.m:
            tours = construct_tours(self.tau, self.D, self.m, self.params, self.rng)
            if self.params.local_search:
                tours = np.stack([two_opt(x, self.D) for x in tours])
            tours = np.stack([canonical_tour(x) for x in tours])  # one way to write a cycle: equal cycles, equal bits
            lens = np.array([tour_length(x, self.D) for x in tours])
            k = int(np.argmin(lens))
            if lens[k] < self.best_len:
                self.best_tour, self.best_len = tours[k].copy(), float(lens[k])
            bs = (t + 1) % self.params.bs_every == 0
            tour, length = (self.best_tour, self.best_len) if bs else (tours[k], float(lens[k]))
            self.tau, lo, hi = mmas_update(self.tau, tour, length, self.best_len, self.params)
            self.bounds.append((lo, hi, float(self.tau.min()), float(self.tau.max())))
        self.history.append(self.best_len)

    def adopt(self, tour: np.ndarray, length: float) -> None:
        if length < self.best_len:  # strictly shorter only: ties keep the colony's own tour
            self.best_tour, self.best_len = np.array(tour, dtype=np.int64), float(length)

    def result(self) -> dict[str, Any]:
        return {"length": self.best_len, "tour": self.best_tour.copy(), "history": np.array(self.history),
                "bounds": np.array(self.bounds).reshape(-1, 4), "ants": self.m}


def aco(D: np.ndarray, ants: int, iters: int, params: ACOParams = ACOParams(), seed: int = 0) -> dict[str, Any]:
    """One MAX-MIN colony on one machine: {'length', 'tour', 'history' (ell_bs per iteration), 'bounds'}."""
    D = _check_D(D)
    _check(ants, iters, 1, "ring")
    col = _Colony(D, ants, params, seed, 0)
    for t in range(int(iters)):
        col.step(t)
    return col.result()


def naive_aco(D: np.ndarray, ants: int, iters: int, params: ACOParams = ACOParams(), seed: int = 0) -> dict[str, Any]:
    """Ant System (Dorigo, Maniezzo and Colorni 1996): tau_0 = m / ell_nn, every ant deposits 1/ell(T_k), no bounds."""
    D = _check_D(D)
    _check(ants, iters, 1, "ring")
    rng = island_stream(seed, 0)
    tau = np.full(D.shape, ants / tour_length(nearest_neighbour_tour(D), D))
    best_tour, best_len, hist = np.full(len(D), -1, dtype=np.int64), np.inf, []
    for _ in range(int(iters)):
        tours = construct_tours(tau, D, int(ants), params, rng)
        if params.local_search:
            tours = np.stack([two_opt(x, D) for x in tours])
        tours = np.stack([canonical_tour(x) for x in tours])
        lens = [tour_length(x, D) for x in tours]
        tau = (1.0 - params.xi) * tau
        for x, length in zip(tours, lens):
            _deposit(tau, x, 1.0 / length)
            if length < best_len:
                best_tour, best_len = x.copy(), length
        hist.append(best_len)
    return {"length": best_len, "tour": best_tour, "history": np.array(hist)}


def _pack(col: _Colony) -> np.ndarray:
    """The message of a ring exchange: the n cities and the length's 8 bytes, one int64 array of n + 1."""
    return np.concatenate([col.best_tour, np.array([col.best_len]).view(np.int64)])


def train_aco(comm: Comm, D: np.ndarray, ants_per_colony: int | Sequence[int], iters: int, exchange_every: int = 10,
              topology: str = "ring", params: ACOParams = ACOParams(), seed: int = 0) -> dict[str, Any]:
    """Per rank: colony ``comm.rank`` (its ant count, or ``ants_per_colony[rank]``) runs MMAS and exchanges its
    best-so-far tour every ``exchange_every`` iterations. Chapter 31, Section 4.

    ring: send to rank + 1, receive from rank - 1. all: MINLOC as two tree all-reduces (the least length, then the
    least rank holding it) and a broadcast of that rank's tour. A colony with no ants only relays.
    """
    D = _check_D(D)
    K, r = comm.size, comm.rank
    m = ants_per_colony if isinstance(ants_per_colony, (int, np.integer)) else ants_per_colony[r]
    _check(m, iters, exchange_every, topology)
    col = _Colony(D, m, params, seed, r)
    for t in range(int(iters)):
        col.step(t)
        if (t + 1) % exchange_every or K == 1:
            continue
        if topology == "ring":
            comm.send(_pack(col), (r + 1) % K)
            got = comm.recv((r - 1) % K)
            col.adopt(got[:-1], float(got[-1:].view(np.float64)[0]))
        else:
            least = float(tree_allreduce(comm, np.array([col.best_len]), "min")[0])
            who = int(tree_allreduce(comm, np.array([r if col.best_len == least else K], np.int64), "min")[0])
            col.adopt(broadcast(comm, col.best_tour if r == who else None, root=who), least)
    return col.result()


def reference_aco_colonies(D: np.ndarray, ants: int, iters: int, K: int, exchange_every: int = 10,
                           topology: str = "ring", params: ACOParams = ACOParams(), seed: int = 0) -> dict[str, Any]:
    """K colonies (block split of the ants) in lock-step on one machine, exchanging as ``train_aco`` does."""
    D = _check_D(D)
    _check(ants, iters, exchange_every, topology)
    cols = [_Colony(D, b - a, params, seed, k) for k, (a, b) in enumerate(block_bounds(int(ants), int(K)))]
    for t in range(int(iters)):
        for col in cols:
            col.step(t)
        if (t + 1) % exchange_every == 0 and K > 1:
            sent = [(c.best_tour.copy(), c.best_len) for c in cols]  # all send before any adopts
            win = int(np.argmin([s[1] for s in sent]))  # ties: the lowest colony
            for k, col in enumerate(cols):
                col.adopt(*(sent[(k - 1) % K] if topology == "ring" else sent[win]))
    return _best([c.result() for c in cols])


def _best(results: list[dict[str, Any]]) -> dict[str, Any]:
    k = int(np.argmin([v["length"] for v in results]))  # ties: the lowest colony
    hist = np.min(np.stack([v["history"] for v in results]), axis=0)
    return {"length": results[k]["length"], "tour": results[k]["tour"], "colony": k, "history": hist}


def run_aco(D: np.ndarray, ants: int, iters: int, K: int, exchange_every: int = 10, topology: str = "ring",
            params: ACOParams = ACOParams(), seed: int = 0, backend: str = "sim", timeout: float = 120.0
            ) -> tuple[dict[str, Any], Any]:
    """Driver: ``ants`` split over K colonies on K ranks (``block_bounds``); the best colony's result, and the run."""
    _check(ants, iters, exchange_every, topology)  # in the caller, before any rank starts
    counts = [b - a for a, b in block_bounds(int(ants), int(K))]
    res = cluster.run(train_aco, K, backend=backend, args=(_check_D(D), counts, iters),
                      kwargs=dict(exchange_every=exchange_every, topology=topology, params=params, seed=seed),
                      timeout=timeout)
    return _best(list(res.values)), res


def exchange_messages(K: int, topology: str = "ring") -> int:
    """Messages of one exchange: K (ring), or 5 (K - 1) (two tree all-reduces of 2 (K - 1) and a broadcast)."""
    return 0 if K == 1 else (K if topology == "ring" else 5 * (K - 1))


def exchange_bytes(n: int, K: int, topology: str = "ring") -> int:
    """Bytes of one exchange: K messages of n int64 + a length (8 (n + 1) each) on a ring; for all-to-all
    4 (K - 1) messages of 8 bytes (the two all-reduces) and K - 1 tours of 8 n bytes (the broadcast)."""
    return 0 if K == 1 else (K * 8 * (n + 1) if topology == "ring" else (K - 1) * (32 + 8 * n))
