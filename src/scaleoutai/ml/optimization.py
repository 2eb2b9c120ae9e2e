"""Chapter 10: distributed optimization. Synchronous SGD, asynchronous SGD with staleness, local SGD.

Every trainer is per rank (``train_<x>(comm, ...)``) and has a single-machine reference it equals:
sync SGD on K ranks is ``reference_sgd`` with the global batch B = K b (shard-size weights make uneven
shards exact); local SGD with H = 1 is sync SGD; asynchronous SGD replays as ``reference_delayed_sgd``
with the read versions the run recorded (Sections 3 and 4). Models are flat parameter vectors w.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import nn
from ..cluster import Comm
from ..collectives import block_range, ring_allreduce

__all__ = ["Model", "linear_model", "mlp_model", "batch_rows", "reference_sgd", "train_sync_sgd",
           "train_local_sgd", "train_async_sgd", "reference_delayed_sgd", "staleness_histogram",
           "heterogeneous_regression", "reference_local_sgd", "least_squares_hessian", "delayed_gd_threshold"]


@dataclass(frozen=True)
class Model:
    """A model as a flat vector w: ``loss_grad(w, X, y)`` returns the *sums* over rows of loss and gradient.

    Sums, not means, so that K shards add up to the full batch exactly: g = (sum_r G_r) / B.
    kind "linear": squared error (x.w - y)^2; kind "mlp": softmax cross-entropy of ``nn.mlp_forward``.
    """

    kind: str
    sizes: tuple[int, ...]

    def init(self, seed: int = 0, dtype: Any = np.float64) -> np.ndarray:
        if self.kind == "linear":
            return np.zeros(self.sizes[0], dtype=dtype)
        return nn.flatten(nn.mlp_init(list(self.sizes), seed=seed, dtype=dtype))

    def _like(self) -> dict[str, np.ndarray]:
        return {f"{p}{i}": np.empty((self.sizes[i], self.sizes[i + 1]) if p == "W" else (self.sizes[i + 1],))
                for i in range(len(self.sizes) - 1) for p in "Wb"}

    def shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the pieces of w in flat order (PowerSGD compresses the 2-D ones)."""
        if self.kind == "linear":
            return [(self.sizes[0],)]
        like = self._like()
        return [like[k].shape for k in sorted(like)]

    def loss_grad(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        n = len(y)
        if n == 0:
            return 0.0, np.zeros_like(w)
        if self.kind == "linear":
            r = X @ w - y
            return float(r @ r), 2.0 * (X.T @ r)
        params = nn.unflatten(w, self._like())
        logits, cache = nn.mlp_forward(params, X)
        loss, dlogits = nn.softmax_cross_entropy(logits, y)
        _, grads = nn.mlp_backward(params, cache, dlogits)
        return loss * n, nn.flatten(grads, dtype=w.dtype) * n

    def loss(self, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """Mean loss over the rows of (X, y)."""
        return self.loss_grad(w, X, y)[0] / max(len(y), 1)


def linear_model(d: int) -> Model:
    """Least squares on d features: L(w) = mean (x.w - y)^2, convex."""
    return Model("linear", (int(d),))


def mlp_model(sizes: Sequence[int]) -> Model:
    """The course MLP (``nn.mlp_init`` sizes, ReLU) with a softmax cross-entropy head: not convex."""
    if len(sizes) < 2:
        raise ValueError(f"mlp_model needs >= 2 layer widths (inputs ... classes), got {list(sizes)}")
    return Model("mlp", tuple(int(s) for s in sizes))


def heterogeneous_regression(K: int, rows: int, d: int, noise: float = 0.1, seed: int = 0
                             ) -> tuple[np.ndarray, np.ndarray]:
    """K blocks of ``rows`` rows, block r from ``datasets.linear_regression`` with its own w*_r: shards
    that disagree, where plain top-k stalls (Section 6). Block r is rank r's shard under block_range."""
    from .. import datasets

    parts = [datasets.linear_regression(rows, d, noise=noise, seed=seed + r) for r in range(K)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _check(X: np.ndarray, y: np.ndarray, w0: np.ndarray, lr: float) -> None:
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}: give one label per row")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if w0.ndim != 1:
        raise ValueError(f"w0 must be a flat vector (Model.init), got shape {w0.shape}")


def batch_rows(n: int, batch: int | None, step: int, seed: int = 0) -> np.ndarray:
    """The rows of the global batch of ``step``: all n rows (batch None or >= n), else ``batch`` rows
    drawn without replacement from a generator seeded by (seed, step), sorted. Every rank draws the same."""
    if batch is None or batch >= n:
        return np.arange(n)
    if batch < 1:
        raise ValueError(f"batch must be >= 1 (or None for the full batch), got {batch}")
    return np.sort(np.random.default_rng([seed, step]).choice(n, size=batch, replace=False))


def reference_sgd(X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int, lr: float,
                  batch: int | None = None, seed: int = 0) -> tuple[np.ndarray, list[float]]:
    """One machine: w <- w - lr (1/B) sum_{i in batch_t} grad l_i(w). Returns w and the batch loss per step."""
    _check(X, y, w0, lr)
    w, losses = w0.copy(), []
    for t in range(steps):
        rows = batch_rows(len(y), batch, t, seed)
        loss, g = model.loss_grad(w, X[rows], y[rows])
        losses.append(loss / len(rows))
        w = w - lr * (g / len(rows))
    return w, losses


def _my_rows(n: int, batch: int | None, step: int, seed: int, K: int, r: int) -> np.ndarray:
    rows = batch_rows(n, batch, step, seed)
    lo, hi = block_range(len(rows), K, r)
    return rows[lo:hi]


def train_sync_sgd(comm: Comm, X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int,
                   lr: float, batch: int | None = None, seed: int = 0, seconds_per_row: float = 0.0
                   ) -> tuple[np.ndarray, list[float]]:
    """Synchronous data-parallel SGD (Section 4): rank r takes block r of the global batch (block_range),
    computes G_r = sum of its row gradients, one ring all-reduce of [G_r, loss_r], then every rank steps
    w <- w - lr (sum_r G_r) / B. Equals ``reference_sgd`` for any K, K > B included (empty blocks send zeros)."""
    _check(X, y, w0, lr)
    K, r = comm.size, comm.rank
    w, losses = w0.copy(), []
    for t in range(steps):
        rows = _my_rows(len(y), batch, t, seed, K, r)
        B = len(batch_rows(len(y), batch, t, seed))
        loss, g = model.loss_grad(w, X[rows], y[rows])
        comm.compute(seconds_per_row * len(rows))
        total = ring_allreduce(comm, np.append(g, np.asarray(loss, dtype=g.dtype)))
        losses.append(float(total[-1]) / B)
        w = w - lr * (total[:-1] / B)
    return w, losses


def train_local_sgd(comm: Comm, X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int,
                    lr: float, H: int, batch: int | None = None, seed: int = 0, seconds_per_row: float = 0.0
                    ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Local SGD (Stich 2019): every rank takes H local steps on its block of each global batch, then the
    models are averaged with weights n_r / B (one all-reduce of w). H = 1 is exactly ``train_sync_sgd``;
    bytes per step fall by H. Returns the final model and the averaged model after each round."""
    _check(X, y, w0, lr)
    if int(H) != H or H < 1:
        raise ValueError(f"H (local steps between averages) must be an integer >= 1, got {H}")
    K, r = comm.size, comm.rank
    w, rounds = w0.copy(), []
    for t in range(steps):
        rows = _my_rows(len(y), batch, t, seed, K, r)
        B = len(batch_rows(len(y), batch, t, seed))
        if len(rows):  # an empty block keeps w and counts 0 in the average
            _, g = model.loss_grad(w, X[rows], y[rows])
            w = w - lr * (g / len(rows))
        comm.compute(seconds_per_row * len(rows))
        if (t + 1) % H == 0 or t == steps - 1:
            w = ring_allreduce(comm, w * (len(rows) / B))
            rounds.append(w.copy())
    return w, rounds


def _now(comm: Comm) -> float:
    clock = getattr(comm, "clock", None)  # the simulator's clock; wall time on real processes
    return float(clock) if clock is not None else time.perf_counter()


def train_async_sgd(comm: Comm, X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, updates: int,
                    lr: float, replicated: bool = False, seconds_per_row: float = 1e-6,
                    msg_seconds: float = 0.0) -> dict[str, Any]:
    """Asynchronous SGD (Section 3): rank 0 holds w; ranks 1..K-1 each loop: read (w, version), compute the
    gradient of their shard (or of all rows if ``replicated``), push it. The holder applies every
    gradient on arrival, w <- w - lr g, so a gradient read at version v and applied as update u is
    u - v updates stale (tau).

    A receive names its sender, so "whichever gradient arrives first" is decided with time stamps: a
    worker stamps its gradient with the time it is ready (its read time + its measured compute, which
    a straggler factor of ``cluster.Faults(slow=...)`` stretches) and the holder applies pending
    gradients in stamp order (ties: lower rank). Rank 0 returns w, the (worker, version read) of every
    update, the staleness and the stamps; ``reference_delayed_sgd`` replays it exactly.
    """
    _check(X, y, w0, lr)
    K, r = comm.size, comm.rank
    if K < 2:
        raise ValueError("asynchronous SGD needs a parameter holder and at least one worker: world_size >= 2")
    if r > 0:
        lo, hi = (0, len(y)) if replicated else block_range(len(y), K - 1, r - 1)
        pushed = 0
        while True:
            w = comm.recv(0)
            version, t_read, stop = comm.recv(0)  # a float64 header: stamps must not round to w's dtype
            if stop:
                return {"pushed": pushed}
            _, g = model.loss_grad(w, X[lo:hi], y[lo:hi])
            before = _now(comm)
            comm.compute(seconds_per_row * (hi - lo))
            # stamps on a 1 ns grid: clock differences carry rounding that would break ties at random
            ready = round(t_read + (_now(comm) - before) + msg_seconds, 9)
            comm.send(g / max(hi - lo, 1), 0)
            comm.send(np.array([version, ready]), 0)
            pushed += 1

    def reply(dst: int, w: np.ndarray, version: int, t: float, stop: bool = False) -> None:
        comm.send(w, dst)
        comm.send(np.array([version, t + msg_seconds, float(stop)]), dst)

    w = w0.copy()
    pending: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for dst in range(1, K):
        reply(dst, w, 0, 0.0)
    for src in range(1, K):
        pending[src] = (comm.recv(src), comm.recv(src))
    schedule, stamps, t_holder = [], [], 0.0
    for u in range(updates):
        src = min(pending, key=lambda q: (float(pending[q][1][1]), q))
        g, (version, ready) = pending.pop(src)
        w = w - lr * g
        t_holder = max(t_holder, float(ready))
        schedule.append((src, int(version)))
        stamps.append(t_holder)
        if u < updates - 1:
            reply(src, w, u + 1, t_holder)
            pending[src] = (comm.recv(src), comm.recv(src))
    for dst in range(1, K):
        reply(dst, w, updates, t_holder, stop=True)
    sched = np.array(schedule, dtype=np.int64).reshape(-1, 2)
    return {"w": w, "schedule": sched, "staleness": np.arange(len(sched)) - sched[:, 1],
            "times": np.array(stamps)}


def reference_delayed_sgd(X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, lr: float,
                          delays: int | Sequence[int], steps: int | None = None,
                          rows: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Fixed- or given-delay SGD on one machine: w_{t+1} = w_t - lr g_t(w_{max(0, t - tau_t)}), g_t the mean
    gradient over ``rows[t]`` (all rows by default). An int ``delays`` is the same tau every step.
    Returns the final w and all iterates w_0..w_T."""
    _check(X, y, w0, lr)
    if isinstance(delays, (int, np.integer)):
        if steps is None:
            raise ValueError("with a fixed delay tau, also give steps")
        delays = [int(delays)] * steps
    ws = [w0.copy()]
    for t, tau in enumerate(delays):
        if tau < 0:
            raise ValueError(f"delay {tau} at step {t} is negative: a gradient cannot come from the future")
        sel = slice(None) if rows is None else rows[t]
        Xs, ys = X[sel], y[sel]
        _, g = model.loss_grad(ws[max(0, t - int(tau))], Xs, ys)
        ws.append(ws[-1] - lr * (g / max(len(ys), 1)))
    return ws[-1], ws


def staleness_histogram(staleness: np.ndarray) -> np.ndarray:
    """counts[tau] = how many updates were tau updates stale."""
    s = np.asarray(staleness, dtype=np.int64)
    return np.bincount(s, minlength=1) if s.size else np.zeros(1, dtype=np.int64)


# --- convergence (Section 4, "What the theory promises") -------------------------------------------

def reference_local_sgd(X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int, lr: float,
                        H: int, K: int, batch: int | None = None, seed: int = 0
                        ) -> tuple[np.ndarray, list[np.ndarray]]:
    """``train_local_sgd`` on one machine: K models, each stepping on its block of every global batch,
    averaged (weights n_r / B) every H steps and after the last. Returns w and the model after each round."""
    _check(X, y, w0, lr)
    if int(H) != H or H < 1 or K < 1:
        raise ValueError(f"H and K must be integers >= 1, got H = {H}, K = {K}")
    ws, rounds = [w0.copy() for _ in range(K)], []
    for t in range(steps):
        shares = []
        for r in range(K):
            rows = _my_rows(len(y), batch, t, seed, K, r)
            shares.append(len(rows))
            if len(rows):
                ws[r] = ws[r] - lr * (model.loss_grad(ws[r], X[rows], y[rows])[1] / len(rows))
        if (t + 1) % H == 0 or t == steps - 1:
            B = sum(shares)
            avg = sum(w * (n / B) for w, n in zip(ws, shares))
            ws = [avg.copy() for _ in range(K)]
            rounds.append(avg)
    return ws[0], rounds


def least_squares_hessian(X: np.ndarray) -> np.ndarray:
    """The Hessian of the linear model's mean loss L(w) = (1/N) sum (x.w - y)^2: 2 X^T X / N (constant)."""
    return 2.0 * (X.T @ X) / len(X)


def delayed_gd_threshold(lam_max: float, tau: int) -> float:
    """The largest stable step size of fixed-delay gradient descent w_{t+1} = w_t - lr A w_{t-tau} on a
    quadratic with top Hessian eigenvalue lam_max: lr < 2 sin(pi / (2 (2 tau + 1))) / lam_max.

    Along an eigenvector the error obeys e_{t+1} = e_t - a e_{t-tau}, a = lr lam, whose characteristic
    polynomial z^(tau+1) - z^tau + a has every root inside the unit circle iff 0 < a < 2 sin(pi/(4 tau + 2))
    (Levin and May 1976). tau = 0 gives the familiar 2 / lam_max; large tau gives ~ pi / (2 tau lam_max)."""
    if tau < 0 or not lam_max > 0:
        raise ValueError(f"need tau >= 0 and lam_max > 0, got tau = {tau}, lam_max = {lam_max}")
    return 2.0 * float(np.sin(np.pi / (2 * (2 * tau + 1)))) / float(lam_max)
