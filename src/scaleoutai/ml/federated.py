"""Federated averaging over the communicator (Chapter 14): FedAvg, FedProx, client dropout, non-IID splits.

Rank 0 is the server. Clients 0..C-1 live on ranks 1..K-1, a contiguous block of clients per rank
(``collectives.worker_range(C, K, r)``), and a rank runs its clients one after another; with K = 1 the server
hosts every client itself, and with K - 1 > C some ranks host none. Client k holds (X_k, y_k) of n_k
samples; only the rank hosting k reads them. The model is a ``scaleoutai.nn`` MLP, carried as one flat
vector w of P numbers (``nn.flatten``).

Round t (McMahan et al. 2017): every rank computes the selected clients from the seed; the server sends
w_t to each rank hosting a selected client; each selected client runs E epochs of mini-batch SGD from
w_t (FedProx adds mu (w - w_t) to every gradient) and reports (k, n_k, w_k) unless it drops; the server
sets

    w_{t+1} = sum_{k reported} n_k w_k / sum_{k reported} n_k,    and w_{t+1} = w_t when nobody reported.

A client drops by the seeded rule ``drops(k, t, p_drop, seed)`` (its rank sends no row for it: the rows
that arrive stand in for the server's deadline) or because its rank crashed (``PeerCrashedError`` on the
simulator): either way it is excluded, and the aggregate is exactly the weighted average of the rest.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster, nn
from ..cluster import Comm
from ..collectives import worker_range
from ..errors import PeerCrashedError

__all__ = ["dirichlet_split", "label_histogram", "client_update", "weighted_average", "select_clients",
           "drops", "reference_fedavg", "train_fedavg", "run_fedavg", "accuracy"]

Shards = list[tuple[np.ndarray, np.ndarray]]


def dirichlet_split(labels: np.ndarray, clients: int, alpha: float, seed: int = 0) -> list[np.ndarray]:
    """Label-skewed split: for each class c, shares p ~ Dirichlet(alpha 1_C) cut its samples over the clients.

    Returns C sorted index arrays; every sample goes to exactly one client. alpha -> infinity gives each
    client the global label mix (IID); alpha -> 0 gives each client few classes. Chapter 14, Section 2.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be a 1-D array of class ids, got shape {labels.shape}")
    if isinstance(clients, bool) or int(clients) != clients or clients < 1:
        raise ValueError(f"clients must be an integer >= 1, got {clients!r}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0 (small alpha = strong label skew), got {alpha!r}")
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(int(clients))]
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        shares = rng.dirichlet(np.full(int(clients), float(alpha)))
        cuts = np.floor(np.cumsum(shares)[:-1] * len(idx)).astype(np.int64)
        for k, block in enumerate(np.split(idx, cuts)):
            parts[k].append(block)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


def label_histogram(labels: np.ndarray, parts: list[np.ndarray], classes: int) -> np.ndarray:
    """counts[k, c] = number of samples of class c held by client k (the picture of the skew)."""
    labels = np.asarray(labels)
    return np.stack([np.bincount(labels[p], minlength=classes) for p in parts])


def client_update(w: np.ndarray, like: nn.Params, X: np.ndarray, y: np.ndarray, epochs: int, lr: float,
                  batch_size: int, seed: Any, mu: float = 0.0) -> np.ndarray:
    """E epochs of mini-batch SGD on softmax cross-entropy from w (flat), shuffled by ``seed``.

    FedProx (Li et al. 2020): the local objective is F_k(v) + mu/2 ||v - w||^2, so each step uses
    grad F_k(v) + mu (v - w). A client with no data returns w unchanged.
    """
    if len(X) == 0:
        return w.copy()
    params = nn.unflatten(w.copy(), like)
    anchor = nn.unflatten(w, like) if mu else None
    rng = np.random.default_rng(seed)
    n = len(X)
    b = n if batch_size is None or batch_size <= 0 else min(int(batch_size), n)
    for _ in range(int(epochs)):
        order = rng.permutation(n)
        for lo in range(0, n, b):
            rows = order[lo:lo + b]
            logits, cache = nn.mlp_forward(params, X[rows])
            _, dlogits = nn.softmax_cross_entropy(logits, y[rows])
            _, grads = nn.mlp_backward(params, cache, dlogits)
            if anchor is not None:
                for key in grads:
                    grads[key] = grads[key] + mu * (params[key] - anchor[key])
            nn.sgd_step(params, grads, lr)
    return nn.flatten(params, dtype=w.dtype)


def weighted_average(models: list[np.ndarray], counts: list[int] | np.ndarray) -> np.ndarray | None:
    """sum_k n_k w_k / sum_k n_k in the given order, accumulated in float64, returned in the models' dtype.

    None when sum n_k = 0 (nobody reported, or only empty clients): the caller keeps its model.
    """
    counts = np.asarray(counts, dtype=np.float64).reshape(-1)
    if len(models) != len(counts):
        raise ValueError(f"weighted_average got {len(models)} models but {len(counts)} sample counts")
    if np.any(counts < 0):
        raise ValueError("sample counts n_k must be >= 0")
    total = float(counts.sum())
    if total == 0:
        return None
    acc = np.zeros(models[0].shape, dtype=np.float64)
    for n_k, w_k in zip(counts, models):
        acc += n_k * w_k.astype(np.float64)
    return (acc / total).astype(models[0].dtype)


def select_clients(clients: int, fraction: float, t: int, seed: int) -> np.ndarray:
    """The sorted ids of the max(1, round(fraction C)) clients drawn for round t (the same on every rank)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    m = max(1, int(round(fraction * clients)))
    if m >= clients:
        return np.arange(clients, dtype=np.int64)
    return np.sort(np.random.default_rng([seed, t, 1]).choice(clients, size=m, replace=False)).astype(np.int64)


def drops(k: int, t: int, p_drop: float, seed: int) -> bool:
    """Whether client k fails to report in round t: an independent coin of probability p_drop per (k, t)."""
    return p_drop > 0 and bool(np.random.default_rng([seed, t, k, 2]).random() < p_drop)



def _local_reports(w: np.ndarray, like: nn.Params, shards: Shards, mine: list[int], t: int,
                   opts: dict[str, Any]) -> list[tuple[int, int, np.ndarray]]:
    out = []
    for k in mine:
        if drops(k, t, opts["p_drop"], opts["seed"]):
            continue
        X, y = shards[k]
        w_k = client_update(w, like, X, y, opts["epochs"], opts["lr"], opts["batch_size"],
                            [opts["seed"], t, k, 3], opts["mu"])
        out.append((k, len(X), w_k))
    return out


def _opts(rounds: int, epochs: int, lr: float, batch_size: int, fraction: float, mu: float, p_drop: float,
          seed: int) -> dict[str, Any]:
    if int(rounds) != rounds or rounds < 0 or int(epochs) != epochs or epochs < 1:
        raise ValueError(f"need rounds >= 0 and epochs >= 1, got rounds={rounds!r}, epochs={epochs!r}")
    if not 0 <= p_drop <= 1 or mu < 0:
        raise ValueError(f"need 0 <= p_drop <= 1 and mu >= 0, got p_drop={p_drop!r}, mu={mu!r}")
    return dict(rounds=int(rounds), epochs=int(epochs), lr=float(lr), batch_size=int(batch_size or 0),
                fraction=float(fraction), mu=float(mu), p_drop=float(p_drop), seed=int(seed))


def _aggregate(w: np.ndarray, reports: list[tuple[int, int, np.ndarray]], t: int, selected: np.ndarray,
               keep_models: bool) -> tuple[np.ndarray, dict[str, Any]]:
    reports = sorted(reports, key=lambda r: r[0])  # client order: the same sum on every K
    new = weighted_average([r[2] for r in reports], [r[1] for r in reports]) if reports else None
    w_next = w.copy() if new is None else new
    spread = (sum(n * float(np.sum((m.astype(np.float64) - w_next) ** 2)) for _, n, m in reports)
              / max(1, sum(n for _, n, _ in reports)))
    log = {"round": t, "selected": [int(k) for k in selected], "reported": [int(r[0]) for r in reports],
           "n": [int(r[1]) for r in reports], "spread": spread}
    if keep_models:
        log["w"] = w_next.copy()
    return w_next, log


def reference_fedavg(w0: np.ndarray, like: nn.Params, shards: Shards, rounds: int, epochs: int = 1,
                     lr: float = 0.1, batch_size: int = 32, fraction: float = 1.0, mu: float = 0.0,
                     p_drop: float = 0.0, seed: int = 0, never_report: tuple[int, ...] = (),
                     keep_models: bool = False) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """FedAvg on one machine: the definition ``train_fedavg`` must reproduce exactly (same seeds).

    ``never_report`` lists clients whose rank has crashed (they never report). Returns (w, history).
    """
    opts = _opts(rounds, epochs, lr, batch_size, fraction, mu, p_drop, seed)
    w, history = w0.copy(), []
    for t in range(opts["rounds"]):
        selected = select_clients(len(shards), opts["fraction"], t, opts["seed"])
        mine = [int(k) for k in selected if int(k) not in set(never_report)]
        w, log = _aggregate(w, _local_reports(w, like, shards, mine, t, opts), t, selected, keep_models)
        history.append(log)
    return w, history


def train_fedavg(comm: Comm, w0: np.ndarray, like: nn.Params, shards: Shards, rounds: int, epochs: int = 1,
                 lr: float = 0.1, batch_size: int = 32, fraction: float = 1.0, mu: float = 0.0,
                 p_drop: float = 0.0, seed: int = 0, keep_models: bool = False, seconds_per_sample: float = 0.0
                 ) -> tuple[np.ndarray | None, list[dict[str, Any]]]:
    """Per rank: FedAvg (mu = 0) or FedProx (mu > 0), server on rank 0. Chapter 14, Section 4.

    Per round the server sends w_t (P numbers) to each rank hosting a selected client, and that rank
    answers with two messages: the int64 rows (k, n_k) of its clients that report and their models
    (reported x P). ``seconds_per_sample`` charges E n_k of simulated compute per reporting client.
    Returns (w, history) on rank 0 and (None, []) elsewhere.
    """
    opts = _opts(rounds, epochs, lr, batch_size, fraction, mu, p_drop, seed)
    C, K, r = len(shards), comm.size, comm.rank
    if r != 0:
        mine = list(worker_range(C, K, r))
        for t in range(opts["rounds"]):
            sel = set(select_clients(C, opts["fraction"], t, opts["seed"]).tolist())
            chosen = [k for k in mine if k in sel]
            if not chosen:
                continue
            w = comm.recv(0)
            reports = _local_reports(w, like, shards, chosen, t, opts)
            comm.compute(seconds_per_sample * opts["epochs"] * sum(n for _, n, _ in reports))
            comm.send(np.array([[k, n] for k, n, _ in reports], dtype=np.int64).reshape(-1, 2), 0)
            comm.send(np.stack([m for *_, m in reports]) if reports else np.zeros((0, w.size), w.dtype), 0)
        return None, []
    w, history, dead = w0.copy(), [], set()
    for t in range(opts["rounds"]):
        selected = select_clients(C, opts["fraction"], t, opts["seed"])
        sel = set(selected.tolist())
        reports = _local_reports(w, like, shards, [k for k in worker_range(C, K, 0) if k in sel], t, opts)
        comm.compute(seconds_per_sample * opts["epochs"] * sum(n for _, n, _ in reports))
        ranks = [q for q in range(1, K) if q not in dead and any(k in sel for k in worker_range(C, K, q))]
        for q in ranks:
            comm.send(w, q)
        for q in ranks:
            try:
                meta = comm.recv(q)
                models = comm.recv(q)
            except PeerCrashedError:  # a crashed rank's clients are excluded from now on
                dead.add(q)
                continue
            hosted = set(worker_range(C, K, q)) & sel
            if (meta.ndim != 2 or meta.shape[1] != 2 or len(models) != len(meta)
                    or not set(meta[:, 0].tolist()) <= hosted or np.any(meta[:, 1] < 0)):
                raise ValueError(f"rank {q} sent a malformed report: rows {meta.tolist()} for clients "
                                 f"{sorted(hosted)}")
            reports += [(int(k), int(n), m) for (k, n), m in zip(meta, models)]
        w, log = _aggregate(w, reports, t, selected, keep_models)
        history.append(log)
    return w, history


def run_fedavg(w0: np.ndarray, like: nn.Params, shards: Shards, K: int, backend: str = "sim",
               faults: cluster.Faults | None = None, timeout: float = 120.0, **kwargs: Any
               ) -> tuple[np.ndarray, list[dict[str, Any]], cluster.RunResult]:
    """Driver: ``train_fedavg`` on K ranks; returns the server's (w, history) and the RunResult."""
    res = cluster.run(train_fedavg, K, backend=backend, args=(w0, like, shards), kwargs=kwargs,
                      faults=faults, timeout=timeout)
    w, history = res.values[0]
    return w, history, res


def accuracy(w: np.ndarray, like: nn.Params, X: np.ndarray, y: np.ndarray) -> float:
    """Share of samples whose argmax logit is the label."""
    logits, _ = nn.mlp_forward(nn.unflatten(w, like), X)
    return float(np.mean(np.argmax(logits, axis=-1) == y))
