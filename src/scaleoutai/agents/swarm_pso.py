"""Particle swarm optimisation (Chapter 31, Sections 2-7): one swarm, and sub-swarms on ranks (islands).

Particle i keeps a position x_i, a velocity v_i and its best position p_i; the swarm keeps its best g.
With r1, r2 ~ U[0, 1) drawn per coordinate, one iteration is (Kennedy and Eberhart 1995; Shi and
Eberhart 1998, inertia weight w)

    v_i <- w v_i + c1 r1 (p_i - x_i) + c2 r2 (g - x_i),      x_i <- clip(x_i + v_i, lower, upper).

Clerc and Kennedy's constriction (2002) is the same update with w = chi, c1 = chi phi1, c2 = chi phi2,
chi = 2 / |2 - phi - sqrt(phi^2 - 4 phi)|, phi = phi1 + phi2 > 4 (``constriction``).

The draws follow pyswarms' order (positions, velocities, then r1 and r2 each iteration) from a NumPy
``RandomState``, so ``reference_pso(..., rng=np.random.RandomState(s))`` retraces pyswarms'
``GlobalBestPSO`` after ``np.random.seed(s)`` bit for bit (``bh_strategy="nearest"``), once the stream
has drawn the swarm that pyswarms' constructor builds and throws away (``pyswarms_stream``).

Island model: K sub-swarms, one per rank, each with its own stream (seed, island); every M iterations
each island sends [best cost, best position] to its ring successor (K messages) or to every other island
(K (K - 1) messages) and adopts a strictly better incoming best as its g.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds

__all__ = ["sphere", "rastrigin", "rosenbrock", "ackley", "FUNCTIONS", "BOUNDS", "PSOParams", "constriction",
           "island_stream", "pyswarms_stream", "init_swarm", "pso_step", "reference_pso", "reference_pso_islands",
           "train_pso",
           "run_pso", "migration_messages"]

Objective = Callable[[np.ndarray], np.ndarray]


def sphere(x: np.ndarray) -> np.ndarray:
    """sum_j x_j^2 per row; minimum 0 at 0."""
    return np.sum(x * x, axis=1)


def rastrigin(x: np.ndarray) -> np.ndarray:
    """10 d + sum_j (x_j^2 - 10 cos(2 pi x_j)); minimum 0 at 0, a grid of local minima."""
    return 10.0 * x.shape[1] + np.sum(x * x - 10.0 * np.cos(2 * np.pi * x), axis=1)


def rosenbrock(x: np.ndarray) -> np.ndarray:
    """sum_j 100 (x_{j+1} - x_j^2)^2 + (1 - x_j)^2; minimum 0 at (1, ..., 1), a curved valley."""
    return np.sum(100.0 * (x[:, 1:] - x[:, :-1] ** 2) ** 2 + (1.0 - x[:, :-1]) ** 2, axis=1)


def ackley(x: np.ndarray) -> np.ndarray:
    """-20 exp(-0.2 sqrt(mean x^2)) - exp(mean cos 2 pi x) + 20 + e; minimum 0 at 0."""
    return (-20.0 * np.exp(-0.2 * np.sqrt(np.mean(x * x, axis=1))) - np.exp(np.mean(np.cos(2 * np.pi * x), axis=1))
            + 20.0 + np.e)


FUNCTIONS: dict[str, Objective] = {"sphere": sphere, "rastrigin": rastrigin, "rosenbrock": rosenbrock, "ackley": ackley}
BOUNDS = {"sphere": 5.12, "rastrigin": 5.12, "rosenbrock": 2.048, "ackley": 32.768}  # the box [-b, b]^d


@dataclass(frozen=True)
class PSOParams:
    """Inertia w, cognitive c1, social c2; ``vmax`` clamps each velocity coordinate to [-vmax, vmax]."""
    w: float = 0.7298
    c1: float = 1.49618
    c2: float = 1.49618
    vmax: float | None = None

    def options(self) -> dict[str, float]:
        """pyswarms' ``options`` dictionary for the same hyperparameters."""
        return {"w": self.w, "c1": self.c1, "c2": self.c2}


def constriction(phi1: float = 2.05, phi2: float = 2.05, kappa: float = 1.0) -> PSOParams:
    """Clerc-Kennedy: chi = 2 kappa / |2 - phi - sqrt(phi^2 - 4 phi)|; returns w = chi, c = chi phi."""
    phi = phi1 + phi2
    if phi <= 4:
        raise ValueError(f"constriction needs phi1 + phi2 > 4, got {phi}: use e.g. 2.05 and 2.05")
    chi = 2 * kappa / abs(2 - phi - np.sqrt(phi * phi - 4 * phi))
    return PSOParams(w=float(chi), c1=float(chi * phi1), c2=float(chi * phi2))


def island_stream(seed: int, island: int) -> np.random.RandomState:
    """The random stream of sub-swarm ``island``: a pure function of (seed, island)."""
    return np.random.RandomState(np.random.SeedSequence([int(seed), int(island)]).generate_state(4))


def pyswarms_stream(seed: int, n: int, d: int, bound: Any, params: PSOParams = PSOParams()) -> np.random.RandomState:
    """The stream pyswarms' optimizers read after ``np.random.seed(seed)``: its base class and its subclass both
    call ``reset()``, so the first swarm drawn is discarded; we draw and drop it too."""
    lo, hi = _box(d, bound)
    rng = np.random.RandomState(int(seed))
    init_swarm(rng, int(n), lo, hi, params)
    return rng


def init_swarm(rng: np.random.RandomState, n: int, lower: np.ndarray, upper: np.ndarray,
               params: PSOParams) -> dict[str, Any]:
    """Positions U[lower, upper), velocities U[-vmax, vmax) (U[0, 1) without a clamp, as pyswarms draws them)."""
    d = lower.size
    x = rng.uniform(low=np.repeat(lower[None], n, 0), high=np.repeat(upper[None], n, 0), size=(n, d))
    vlo, vhi = (0.0, 1.0) if params.vmax is None else (-params.vmax, params.vmax)
    v = (vhi - vlo) * rng.random_sample(size=(n, d)) + vlo
    return {"x": x, "v": v, "p": x.copy(), "pcost": np.full(n, np.inf), "g": np.zeros(d), "gcost": np.inf}


def pso_step(f: Objective, s: dict[str, Any], rng: np.random.RandomState, lower: np.ndarray, upper: np.ndarray,
             params: PSOParams) -> None:
    """One iteration in place: evaluate, update personal and swarm bests, move (the formula above)."""
    x = s["x"]
    if len(x):
        cost = np.asarray(f(x), dtype=np.float64)
        better = cost < s["pcost"]  # strict: a tie keeps the older best, like pyswarms
        s["p"] = np.where(better[:, None], x, s["p"])
        s["pcost"] = np.where(better, cost, s["pcost"])
        k = int(np.argmin(s["pcost"]))
        if s["pcost"][k] < s["gcost"]:
            s["g"], s["gcost"] = s["p"][k].copy(), float(s["pcost"][k])
    r1 = rng.uniform(0, 1, x.shape)
    r2 = rng.uniform(0, 1, x.shape)
    # the same expression tree as pyswarms.backend.operators.compute_velocity, so the bits agree
    v = (params.w * s["v"]) + params.c1 * r1 * (s["p"] - x) + params.c2 * r2 * (s["g"] - x)
    if params.vmax is not None:
        v = np.clip(v, -params.vmax, params.vmax)
    x = x + v
    s["v"], s["x"] = v, np.where(x > upper, upper, np.where(x < lower, lower, x))


def _box(d: int, bound: float | tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(d, bool) or int(d) != d or d < 1:
        raise ValueError(f"the dimension d must be an integer >= 1, got {d!r}")
    if isinstance(bound, tuple):
        lo, hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), (int(d),)).copy() for b in bound)
    else:
        lo, hi = np.full(int(d), -float(bound)), np.full(int(d), float(bound))
    if not np.all(lo < hi):
        raise ValueError(f"each lower bound must be below its upper bound, got {lo} and {hi}")
    return lo, hi


def _check(n: int, iters: int, every: int, topology: str) -> None:
    if isinstance(n, bool) or int(n) != n or n < 1 or int(iters) != iters or iters < 0:
        raise ValueError(f"PSO needs n >= 1 particles and iters >= 0, got n={n!r}, iters={iters!r}")
    if int(every) != every or every < 1:
        raise ValueError(f"the migration interval M must be an integer >= 1, got {every!r}")
    if topology not in ("ring", "all"):
        raise ValueError(f"unknown migration topology {topology!r}: choose 'ring' or 'all'")


def reference_pso(f: Objective, n: int, d: int, bound: Any, iters: int, params: PSOParams = PSOParams(),
                  seed: int = 0, rng: np.random.RandomState | None = None) -> dict[str, Any]:
    """One swarm of n particles on one machine: {'cost', 'position', 'history' (g's cost per iteration)}."""
    _check(n, iters, 1, "ring")
    lo, hi = _box(d, bound)
    rng = island_stream(seed, 0) if rng is None else rng
    s, hist = init_swarm(rng, int(n), lo, hi, params), []
    for _ in range(int(iters)):
        pso_step(f, s, rng, lo, hi, params)
        hist.append(s["gcost"])
    return {"cost": s["gcost"], "position": s["g"], "history": np.array(hist)}


def _sources(i: int, K: int, topology: str) -> list[int]:
    """The islands whose best island i receives, in the order it considers them."""
    if K == 1:
        return []
    return [(i - 1) % K] if topology == "ring" else [j for j in range(K) if j != i]


def _adopt(s: dict[str, Any], msgs: list[np.ndarray]) -> None:
    for m in msgs:  # strictly better only, in source order: ties keep the island's own best
        if m[0] < s["gcost"]:
            s["gcost"], s["g"] = float(m[0]), m[1:].copy()


def _best(states: list[dict[str, Any]]) -> dict[str, Any]:
    k = int(np.argmin([s["gcost"] for s in states]))  # ties: the lowest island
    return {"cost": states[k]["gcost"], "position": states[k]["g"], "island": k}


def reference_pso_islands(f: Objective, n: int, d: int, bound: Any, iters: int, K: int, every: int = 10,
                          topology: str = "ring", params: PSOParams = PSOParams(), seed: int = 0) -> dict[str, Any]:
    """K sub-swarms (block split of n particles) in lock-step on one machine, migrating every ``every`` iterations."""
    _check(n, iters, every, topology)
    lo, hi = _box(d, bound)
    rngs = [island_stream(seed, i) for i in range(K)]
    states = [init_swarm(rngs[i], b - a, lo, hi, params) for i, (a, b) in enumerate(block_bounds(int(n), K))]
    hist = []
    for t in range(int(iters)):
        for i in range(K):
            pso_step(f, states[i], rngs[i], lo, hi, params)
        if (t + 1) % every == 0:
            sent = [np.concatenate([[s["gcost"]], s["g"]]) for s in states]  # all send before any adopts
            for i in range(K):
                _adopt(states[i], [sent[j] for j in _sources(i, K, topology)])
        hist.append(min(s["gcost"] for s in states))
    return {**_best(states), "history": np.array(hist)}


def train_pso(comm: Comm, f: Objective, n: int, d: int, bound: Any, iters: int, every: int = 10,
              topology: str = "ring", params: PSOParams = PSOParams(), seed: int = 0) -> dict[str, Any]:
    """Per rank: island ``comm.rank`` of the block split; migration over the communicator. Chapter 31, Section 4.

    Each island knows whom it hears from (its ring predecessor, or every other island in rank order), so a
    plain ``recv(src)`` suffices. A lost or crashed source's best is skipped and the island goes on alone.
    """
    _check(n, iters, every, topology)
    lo, hi = _box(d, bound)
    K, i = comm.size, comm.rank
    a, b = block_bounds(int(n), K)[i]
    rng = island_stream(seed, i)
    s, hist = init_swarm(rng, b - a, lo, hi, params), []
    dead: set[int] = set()
    for t in range(int(iters)):
        pso_step(f, s, rng, lo, hi, params)
        if (t + 1) % every == 0 and K > 1:
            msg = np.concatenate([[s["gcost"]], s["g"]])
            srcs = _sources(i, K, topology)
            dsts = [(i + 1) % K] if topology == "ring" else srcs
            for j in dsts:
                comm.send(msg, j)
            got = []
            for j in srcs:
                if j in dead:
                    continue
                try:
                    got.append(comm.recv(j))
                except cluster.MessageLostError:
                    continue  # this migration from j is lost; the next one may arrive
                except cluster.PeerCrashedError:
                    dead.add(j)  # j is gone: stop waiting for it
            _adopt(s, got)
        hist.append(s["gcost"])
    return {"cost": s["gcost"], "position": s["g"], "history": np.array(hist), "particles": b - a}


def run_pso(f: Objective, n: int, d: int, bound: Any, iters: int, K: int, every: int = 10, topology: str = "ring",
            params: PSOParams = PSOParams(), seed: int = 0, faults: cluster.Faults | None = None,
            timeout: float = 120.0) -> tuple[dict[str, Any], Any]:
    """Driver: K islands on K ranks; returns the best over the islands that finished, and the run."""
    res = cluster.run(train_pso, K, args=(f, n, d, bound, iters), faults=faults, timeout=timeout,
                      kwargs=dict(every=every, topology=topology, params=params, seed=seed))
    alive = [(r, v) for r, v in enumerate(res.values) if isinstance(v, dict)]
    k = min(range(len(alive)), key=lambda m: (alive[m][1]["cost"], alive[m][0]))
    r, v = alive[k]
    hist = np.min(np.stack([w["history"] for _, w in alive]), axis=0)
    return {"cost": v["cost"], "position": v["position"], "island": r, "history": hist}, res


def migration_messages(K: int, iters: int, every: int, topology: str = "ring") -> int:
    """Messages of a run: iters // every migrations of K (ring) or K (K - 1) (all) messages; 0 when K = 1."""
    if K == 1:
        return 0
    return (int(iters) // int(every)) * (K if topology == "ring" else K * (K - 1))
