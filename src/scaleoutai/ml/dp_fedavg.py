"""Client-level differential privacy: DP-FedAvg (Chapter 14, Section 4; McMahan et al., ICLR 2018).

DP-SGD (``privacy``) protects one example; DP-FedAvg protects one client, with all its examples. Round t,
over N clients:
1. the server samples each client independently with probability q (the same draw on every rank);
2. every sampled client k trains from w_t as in FedAvg and clips its model delta to L2 norm C:
       Delta_k = w_t^k - w_t,    Delta_k <- Delta_k min(1, C / ||Delta_k||)
   (``privacy.clip_per_example``'s factor, so the clipped norm is <= C);
3. the server adds Gaussian noise to the SUM and divides by the expected number of clients, fixed:
       w_{t+1} = w_t + (sum_{k sampled} Delta_k + N(0, sigma^2 C^2 I)) / (q N).
Adding or removing one client changes the sum by at most C whatever its data, and the denominator does
not depend on who was sampled, so each round is the Poisson-subsampled Gaussian mechanism with rate q
and noise multiplier sigma, applied to clients. The privacy of T rounds for every client is
``privacy.epsilon(q, sigma, T, delta)``: the same RDP accountant as DP-SGD, with q the client sampling
rate and steps = rounds. With q = 1, C = inf and sigma = 0 a round is FedAvg with equal client weights
and the fixed denominator N. A sampled client that does not report (dropout, a crashed rank) adds
nothing; the denominator stays q N.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import cluster, nn
from ..cluster import Comm
from ..collectives import worker_range
from ..errors import PeerCrashedError
from .federated import Shards, client_update
from .privacy import clip_per_example

__all__ = ["sample_clients", "clip_update", "noisy_sum_update", "reference_dp_fedavg", "train_dp_fedavg",
           "run_dp_fedavg"]


def sample_clients(clients: int, q: float, t: int, seed: int) -> np.ndarray:
    """The sorted ids of round t's clients: each in independently with probability q (Poisson sampling)."""
    if not 0 < q <= 1:
        raise ValueError(f"the client sampling rate q must be in (0, 1], got {q!r}")
    return np.flatnonzero(np.random.default_rng([seed, t, 5]).random(int(clients)) < q).astype(np.int64)


def clip_update(delta: np.ndarray, C: float) -> np.ndarray:
    """delta min(1, C / ||delta||) (L2 over the whole model; C = inf leaves it unchanged, bit for bit)."""
    return clip_per_example({"delta": np.asarray(delta)[None]}, C)[0]["delta"][0]


def noisy_sum_update(clipped: list[np.ndarray], C: float, sigma: float, expected: float,
                     rng: np.random.Generator, size: int) -> np.ndarray:
    """(sum_k clipped_k + N(0, sigma^2 C^2 I)) / expected, summed in the given order in float64."""
    if sigma < 0 or not expected > 0:
        raise ValueError(f"need sigma >= 0 and expected > 0, got sigma={sigma!r}, expected={expected!r}")
    total = np.zeros(size, dtype=np.float64)
    for d in clipped:
        total += d
    if sigma > 0:
        if not math.isfinite(C):
            raise ValueError("noise sigma C needs a finite clipping norm C: an unclipped client has no bounded "
                             "sensitivity")
        total += sigma * C * rng.standard_normal(size)
    return total / expected


def _check(q: float, C: float, sigma: float, rounds: int) -> None:
    if not 0 < q <= 1 or not C > 0 or sigma < 0 or int(rounds) != rounds or rounds < 0:
        raise ValueError(f"need 0 < q <= 1, C > 0, sigma >= 0, rounds >= 0; got q={q!r}, C={C!r}, "
                         f"sigma={sigma!r}, rounds={rounds!r}")


def _deltas(w: np.ndarray, like: nn.Params, shards: Shards, ks: list[int], t: int, C: float,
            local: dict[str, Any]) -> list[tuple[int, np.ndarray]]:
    return [(k, clip_update(client_update(w, like, *shards[k], local["epochs"], local["lr"], local["batch_size"],
                                          [local["seed"], t, k, 3]) - w, C)) for k in ks]


def reference_dp_fedavg(w0: np.ndarray, like: nn.Params, shards: Shards, rounds: int, q: float, C: float,
                        sigma: float, epochs: int = 1, lr: float = 0.1, batch_size: int = 32, seed: int = 0
                        ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """DP-FedAvg on one machine: the definition ``train_dp_fedavg`` reproduces exactly (same seeds)."""
    _check(q, C, sigma, rounds)
    local = dict(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed)
    w, history, N = w0.astype(np.float64), [], len(shards)
    for t in range(int(rounds)):
        sampled = [int(k) for k in sample_clients(N, q, t, seed)]
        reports = _deltas(w, like, shards, sampled, t, C, local)
        w = w + noisy_sum_update([d for _, d in reports], C, sigma, q * N, np.random.default_rng([seed, t, 6]), w.size)
        history.append({"round": t, "sampled": sampled, "reported": [k for k, _ in reports]})
    return w, history


def train_dp_fedavg(comm: Comm, w0: np.ndarray, like: nn.Params, shards: Shards, rounds: int, q: float,
                    C: float, sigma: float, epochs: int = 1, lr: float = 0.1, batch_size: int = 32, seed: int = 0
                    ) -> tuple[np.ndarray | None, list[dict[str, Any]]]:
    """Per rank: DP-FedAvg, server on rank 0, clients on ranks 1..K-1 (``worker_range``). Chapter 14, Section 4.

    Per round the server sends w_t to each rank hosting a sampled client; the rank clips each of its
    clients' deltas itself (the raw delta never leaves it) and answers with the client ids and the
    clipped deltas; the server sums in client order, adds the noise once and divides by q N.
    Returns (w, history) on rank 0 and (None, []) elsewhere.
    """
    _check(q, C, sigma, rounds)
    local = dict(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed)
    N, K, r = len(shards), comm.size, comm.rank
    if r != 0:
        mine = set(worker_range(N, K, r))
        for t in range(int(rounds)):
            chosen = [int(k) for k in sample_clients(N, q, t, seed) if int(k) in mine]
            if chosen:
                w = comm.recv(0)
                reports = _deltas(w, like, shards, chosen, t, C, local)
                comm.send(np.array([k for k, _ in reports], dtype=np.int64), 0)
                comm.send(np.stack([d for _, d in reports]), 0)
        return None, []
    w, history, dead = w0.astype(np.float64), [], set()
    for t in range(int(rounds)):
        sampled = [int(k) for k in sample_clients(N, q, t, seed)]
        reports = _deltas(w, like, shards, [k for k in worker_range(N, K, 0) if k in sampled], t, C, local)
        ranks = [p for p in range(1, K) if p not in dead and set(worker_range(N, K, p)) & set(sampled)]
        for p in ranks:
            comm.send(w, p)
        for p in ranks:
            try:
                ids, deltas = comm.recv(p), comm.recv(p)
            except PeerCrashedError:  # its clients add nothing; the denominator stays q N
                dead.add(p)
                continue
            if len(ids) != len(deltas) or not set(ids.tolist()) <= set(worker_range(N, K, p)):
                raise ValueError(f"rank {p} sent a malformed report for clients {ids.tolist()}")
            reports += list(zip(ids.tolist(), deltas))
        reports.sort(key=lambda kd: kd[0])  # client order: the same sum on every K
        w = w + noisy_sum_update([d for _, d in reports], C, sigma, q * N, np.random.default_rng([seed, t, 6]), w.size)
        history.append({"round": t, "sampled": sampled, "reported": [int(k) for k, _ in reports]})
    return w, history


def run_dp_fedavg(w0: np.ndarray, like: nn.Params, shards: Shards, K: int, backend: str = "sim",
                  faults: cluster.Faults | None = None, timeout: float = 120.0, **kwargs: Any
                  ) -> tuple[np.ndarray, list[dict[str, Any]], cluster.RunResult]:
    """Driver: ``train_dp_fedavg`` on K ranks; returns the server's (w, history) and the RunResult."""
    res = cluster.run(train_dp_fedavg, K, backend=backend, args=(w0, like, shards), kwargs=kwargs,
                      faults=faults, timeout=timeout)
    w, history = res.values[0]
    return w, history, res
