"""Reliable and secure distributed AI (Chapter 35): robust aggregation over the communicator, training
under f Byzantine workers, and the chapter's other two tools re-exported (checkpoint integrity, the
differential-privacy budget ledger).

Robust aggregation, per step (Section 3). With a server (``root=r``): every other rank sends its vector
(d numbers) to the root, which stacks the K vectors in rank order, applies the rule, and sends the
aggregate back: K - 1 messages in and K - 1 out at the root, one each way elsewhere. Without a server
(``root=None``): K - 1 pairwise exchanges (``sendrecv`` with rank r + s and r - s at step s), after which
every rank holds all K vectors and applies the rule itself; honest ranks agree unless an attacker
equivocates (sends different vectors to different peers), which Section 6 shows. The root is trusted.

Training (Section 4): rank r holds shard r and computes the gradient g_r of softmax cross-entropy for an
``nn`` MLP on b rows drawn from ``default_rng([seed, t, r])``; the attacker ranks are omniscient: each
reads every honest shard, recomputes the honest gradients at w_t, and sends its row of
``attack_vectors(attack, honest, n, default_rng([seed, t, 7919]))`` (the coalition shares its randomness).
Then w_{t+1} = w_t - eta * rule(g_1..g_K). ``reference_byzantine_training`` is the one-machine
definition the distributed run must equal bit for bit.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster, nn
from ..cluster import Comm
from .dp_budget import (ORDERS, BudgetExceeded, PrivacyLedger, epsilon_from_rdp, rdp_curve,
                        rdp_subsampled_gaussian)
from .integrity import (IntegrityError, latest_verified, load_sharded, load_sharded_checkpoint, save_sharded,
                        step_folder, write_sharded_checkpoint)
from .robust_agg import (ATTACKS, RULES, aggregate, attack_vectors, check_f, coordinate_median, krum,
                         krum_scores, mean, multi_krum, trimmed_mean)

__all__ = ["RULES", "ATTACKS", "mean", "coordinate_median", "trimmed_mean", "krum_scores", "krum", "multi_krum",
           "aggregate", "check_f", "attack_vectors", "robust_aggregate", "allgather_aggregate",
           "batch_gradient", "reference_byzantine_training", "train_byzantine", "run_byzantine", "accuracy",
           "IntegrityError", "write_sharded_checkpoint", "load_sharded_checkpoint", "save_sharded", "load_sharded",
           "step_folder", "latest_verified", "ORDERS", "BudgetExceeded", "PrivacyLedger", "rdp_subsampled_gaussian", "rdp_curve",
           "epsilon_from_rdp"]


def robust_aggregate(comm: Comm, vector: np.ndarray, rule: str, f: int, m: int | None = None,
                     root: int | None = 0) -> np.ndarray:
    """Every rank passes its vector; every rank gets ``aggregate(stack in rank order, rule, f, m)``.

    ``root`` is the trusted server's rank, or None for the server-less exchange. Chapter 35, Section 4.
    """
    K, r = comm.size, comm.rank
    check_f(rule, K, f)  # before any message, identically on every rank: nobody is left waiting
    vector = np.ascontiguousarray(vector)
    if vector.ndim != 1:
        raise ValueError(f"each rank passes one flat vector, got shape {vector.shape}")
    if root is None:
        return allgather_aggregate(comm, vector, rule, f, m)
    if not 0 <= root < K:
        raise ValueError(f"root must be a rank in 0..{K - 1} (or None for no server), got {root!r}")
    if r != root:
        comm.send(vector, root)
        return comm.recv(root)
    stack = [vector if q == root else comm.recv(q) for q in range(K)]  # rank order: the same stack every run
    shapes = {v.shape for v in stack}
    if len(shapes) != 1:
        raise ValueError(f"the ranks sent vectors of different shapes {sorted(shapes)}: every rank sends d numbers")
    out = aggregate(np.stack(stack), rule, f, m)
    for q in range(K):
        if q != root:
            comm.send(out, q)
    return out


def allgather_aggregate(comm: Comm, vector: np.ndarray, rule: str, f: int, m: int | None = None) -> np.ndarray:
    """No server: K - 1 pairwise exchanges give every rank all K vectors; each rank aggregates them itself."""
    K, r = comm.size, comm.rank
    stack: list[np.ndarray | None] = [None] * K
    stack[r] = vector
    for s in range(1, K):
        stack[(r - s) % K] = comm.sendrecv(vector, (r + s) % K, (r - s) % K)
    return aggregate(np.stack(stack), rule, f, m)


def batch_gradient(w: np.ndarray, like: nn.Params, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Flat gradient of the mean softmax cross-entropy of the MLP ``unflatten(w, like)`` on (X, y); 0 if empty."""
    if len(X) == 0:
        return np.zeros_like(w)
    params = nn.unflatten(w, like)
    logits, cache = nn.mlp_forward(params, X)
    _, grads = nn.mlp_backward(params, cache, nn.softmax_cross_entropy(logits, y)[1])
    return nn.flatten(grads, dtype=w.dtype)


def _rows(n: int, b: int, seed: int, t: int, r: int) -> np.ndarray:
    return np.random.default_rng([seed, t, r]).permutation(n)[:min(b, n)]


def _grad_of(r: int, w: np.ndarray, like: nn.Params, shards: list, b: int, seed: int, t: int) -> np.ndarray:
    X, y = shards[r]
    rows = _rows(len(X), b, seed, t, r)
    return batch_gradient(w, like, X[rows], y[rows])


def _opts(K: int, rule: str, f: int, attack: str, attackers: Any, root: int | None, shards: list) -> tuple[int, ...]:
    check_f(rule, K, f)
    if len(shards) != K:
        raise ValueError(f"pass one (X, y) shard per rank: got {len(shards)} shards for K={K}")
    byz = tuple(sorted({int(a) for a in attackers}))
    if byz and (byz[0] < 0 or byz[-1] >= K):
        raise ValueError(f"attackers must be ranks in 0..{K - 1}, got {list(byz)}")
    if root is not None and root in byz:
        raise ValueError(f"the server (rank {root}) is trusted; put the attackers on other ranks")
    if attack != "none" and attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}: choose 'none' or one of {tuple(ATTACKS)}")
    if byz and len(byz) == K:
        raise ValueError("at least one rank must be honest")
    return byz


def _attack_rows(t: int, w: np.ndarray, like: nn.Params, shards: list, byz: tuple[int, ...], attack: str,
                 b: int, seed: int, params: dict) -> np.ndarray:
    honest = np.stack([_grad_of(q, w, like, shards, b, seed, t) for q in range(len(shards)) if q not in byz])
    rows = attack_vectors(attack, honest, len(byz), np.random.default_rng([seed, t, 7919]), **params)
    return rows.astype(w.dtype)


def reference_byzantine_training(w0: np.ndarray, like: nn.Params, shards: list, steps: int, lr: float, rule: str,
                                 f: int, attack: str = "none", attackers: Any = (), batch_size: int = 32,
                                 seed: int = 0, m: int | None = None, attack_params: dict | None = None,
                                 root: int | None = 0) -> np.ndarray:
    """One machine: the (steps + 1, P) history of w that ``train_byzantine`` must reproduce exactly."""
    K = len(shards)
    byz = _opts(K, rule, f, attack, attackers, root, shards)
    w, out = w0.copy(), [w0.copy()]
    for t in range(int(steps)):
        G = np.stack([_grad_of(q, w, like, shards, batch_size, seed, t) for q in range(K)])
        if byz and attack != "none":
            G[list(byz)] = _attack_rows(t, w, like, shards, byz, attack, batch_size, seed, attack_params or {})
        w = w - lr * aggregate(G, rule, f, m)
        out.append(w)
    return np.stack(out)


def train_byzantine(comm: Comm, w0: np.ndarray, like: nn.Params, shards: list, steps: int, lr: float, rule: str,
                    f: int, attack: str = "none", attackers: Any = (), batch_size: int = 32, seed: int = 0,
                    m: int | None = None, attack_params: dict | None = None, root: int | None = 0,
                    seconds_per_gradient: float = 0.0) -> np.ndarray:
    """Per rank: robust data-parallel SGD; every rank returns the (steps + 1, P) history of w. Section 4.

    An honest rank reads only ``shards[comm.rank]``; an attacker reads every honest shard (omniscient).
    ``seconds_per_gradient`` charges simulated compute per gradient the rank computes.
    """
    K, r = comm.size, comm.rank
    byz = _opts(K, rule, f, attack, attackers, root, shards)
    w, out = w0.copy(), [w0.copy()]
    for t in range(int(steps)):
        if r in byz and attack != "none":
            rows = _attack_rows(t, w, like, shards, byz, attack, batch_size, seed, attack_params or {})
            comm.compute(seconds_per_gradient * (K - len(byz)))
            g = rows[byz.index(r)]
        else:
            g = _grad_of(r, w, like, shards, batch_size, seed, t)
            comm.compute(seconds_per_gradient)
        w = w - lr * robust_aggregate(comm, g, rule, f, m, root)
        out.append(w)
    return np.stack(out)


def run_byzantine(w0: np.ndarray, like: nn.Params, shards: list, faults: cluster.Faults | None = None,
                  network: cluster.Network | None = None, timeout: float = 120.0, **kwargs: Any
                  ) -> tuple[np.ndarray, cluster.RunResult]:
    """Driver: ``train_byzantine`` on K = len(shards) ranks; returns rank 0's history and the RunResult."""
    res = cluster.run(train_byzantine, len(shards), args=(w0, like, shards), kwargs=kwargs, faults=faults,
                      network=network, timeout=timeout)
    return res.values[0], res


def accuracy(w: np.ndarray, like: nn.Params, X: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose largest logit is the label (0 for a model with non-finite weights)."""
    if not np.all(np.isfinite(w)):
        return 0.0
    logits, _ = nn.mlp_forward(nn.unflatten(w, like), X)
    return float(np.mean(np.argmax(logits, axis=-1) == y))
