"""Chapter 12, Sections 2-5: gradient-boosted trees with histogram split finding on K ranks.

Every feature is cut into at most ``bins`` bins by edges e_0 < e_1 < ... (a row goes left at bin b when
x <= e_b). Bin edges come from an ALL-GATHERED SAMPLE: each rank contributes up to ``sample`` rows, all
ranks compute the same edges from the same gathered rows (with ``sample`` >= every shard, the sample is
the whole data and the edges are ``quantile_edges(X)``). Then, per tree level, every rank sums the
gradients g and hessians h of its rows into a (nodes, features, bins, 2) histogram and ONE all-reduce
gives every rank the whole data's histograms. The split of a node maximises Chen and Guestrin's gain
(XGBoost, KDD 2016, eq. 7)

    1/2 [G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G^2 / (H + lambda)] - gamma

over (feature, bin), ties to the lowest feature then the lowest bin, and a node splits only when that
gain is > 0 (gamma is the price of a leaf). The 1/2 is a positive factor: with gamma = 0 the split chosen
and the pruning are those of the bracket alone; gamma changes which nodes split. LightGBM's ``split_gain``
reports the bracket without the 1/2 (Chapter 12, Section 5). Bytes per level: nodes * features * bins *
2 numbers, independent of n.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..cluster import Comm
from ..collectives import all_gather, ring_allreduce

LOSSES = ("squared", "logistic")


def quantile_edges(sample: np.ndarray, bins: int = 32) -> np.ndarray:
    """Bin edges per feature, shape (d, bins - 1), padded with +inf.

    A feature with at most ``bins`` distinct values gets the midpoints between them (its bins are exact,
    as LightGBM's are); otherwise the sample's quantiles at 1/bins, ..., (bins-1)/bins, deduplicated.
    """
    sample = np.asarray(sample, dtype=np.float64)
    if sample.ndim != 2 or len(sample) == 0:
        raise ValueError(f"quantile_edges needs a non-empty sample of shape (m, d), got {sample.shape}")
    if not isinstance(bins, (int, np.integer)) or not 2 <= bins <= 256:
        raise ValueError(f"bins must be an int in 2..256, got {bins!r}")
    if not np.isfinite(sample).all():
        raise ValueError("the features hold NaN or inf: impute them before binning (missing values are not modelled)")
    edges = np.full((sample.shape[1], bins - 1), np.inf)
    for f in range(sample.shape[1]):
        v = np.unique(sample[:, f])
        e = (v[:-1] + v[1:]) / 2 if len(v) <= bins else np.unique(np.quantile(sample[:, f], np.arange(1, bins) / bins))
        edges[f, : len(e)] = e
    return edges


def bin_edges(comm: Comm, X_shard: np.ndarray, bins: int = 32, sample: int = 2048, seed: int = 0) -> np.ndarray:
    """Per rank: all-gather up to ``sample`` rows of each shard (seeded by rank), then ``quantile_edges``.

    Every rank gets the same gathered rows in rank order, hence identical edges.
    """
    X = np.asarray(X_shard, dtype=np.float64)
    rng = np.random.default_rng([seed, comm.rank])
    keep = np.sort(rng.choice(len(X), size=min(sample, len(X)), replace=False))
    return quantile_edges(all_gather(comm, np.ascontiguousarray(X[keep]).reshape(len(keep), X.shape[1])), bins)


def bin_data(X: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin index of every value: the first b with x <= edges[f, b] (``searchsorted`` side left)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != edges.shape[0]:
        raise ValueError(f"X has shape {X.shape} but the edges describe {edges.shape[0]} features")
    return np.stack([np.searchsorted(edges[f], X[:, f], side="left") for f in range(X.shape[1])], axis=1)


def histograms(binned: np.ndarray, g: np.ndarray, h: np.ndarray, node: np.ndarray, n_nodes: int,
               bins: int) -> np.ndarray:
    """Sums of g and h per (node, feature, bin): shape (n_nodes, d, bins, 2); rows with node -1 are skipped."""
    d = binned.shape[1]
    live = node >= 0
    idx = (node[live, None] * d + np.arange(d)) * bins + binned[live]
    size = n_nodes * d * bins
    G = np.bincount(idx.ravel(), np.repeat(g[live], d), minlength=size)
    H = np.bincount(idx.ravel(), np.repeat(h[live], d), minlength=size)
    return np.stack([G, H], axis=-1).astype(np.float64).reshape(n_nodes, d, bins, 2)  # empty shard: int64


def split_gains(hist: np.ndarray, lam: float = 1.0, min_child_weight: float = 1e-3, gamma: float = 0.0
                ) -> np.ndarray:
    """Gain of every split (node, feature, bin b: left holds bins <= b), -inf where a child is too light.

    Chen and Guestrin (KDD 2016) eq. 7: 1/2 [G_L^2/(H_L+lam) + G_R^2/(H_R+lam) - G^2/(H+lam)] - gamma.
    """
    c = hist.cumsum(axis=2)
    GL, HL = c[:, :, :-1, 0], c[:, :, :-1, 1]
    G, H = c[:, :, -1:, 0], c[:, :, -1:, 1]
    GR, HR = G - GL, H - HL
    gain = 0.5 * (GL ** 2 / (HL + lam) + GR ** 2 / (HR + lam) - G ** 2 / (H + lam)) - gamma
    return np.where((HL < min_child_weight) | (HR < min_child_weight), -np.inf, gain)


def best_split(hist: np.ndarray, lam: float = 1.0, min_child_weight: float = 1e-3, gamma: float = 0.0
               ) -> list[tuple[float, int, int]]:
    """(gain, feature, bin) per node: the first maximum in (feature, bin) order."""
    gains = split_gains(hist, lam, min_child_weight, gamma)
    flat = gains.reshape(len(gains), -1)
    best = flat.argmax(axis=1)
    nb = gains.shape[2]
    return [(float(flat[j, best[j]]), int(best[j] // nb), int(best[j] % nb)) for j in range(len(gains))]


def _grow(binned: np.ndarray, g: np.ndarray, h: np.ndarray, edges: np.ndarray, reduce: Callable[[np.ndarray], np.ndarray],
          depth: int, lam: float, lr: float, min_child_weight: float, gamma: float = 0.0) -> dict[str, np.ndarray]:
    """Depth-wise growth: one reduced histogram per level; a node splits when its eq. 7 gain is > 0; leaf
    value -lr G / (H + lambda) (the optimal weight of Chen and Guestrin's eq. 5, shrunk by lr)."""
    bins = edges.shape[1] + 1
    feature, threshold, split_bin, left, right, value, gain = [-1], [np.inf], [-1], [-1], [-1], [0.0], [0.0]
    node = np.zeros(len(g), dtype=np.int64)  # the row's node among this level's nodes; -1: in a leaf
    level = [0]  # tree ids of this level's nodes
    totals: dict[int, tuple[float, float]] = {}
    for _ in range(depth):
        hist = reduce(histograms(binned, g, h, node, len(level), bins))
        nxt: list[int] = []
        new_node = np.full(len(g), -1, dtype=np.int64)
        for j, (gn, f, b) in enumerate(best_split(hist, lam, min_child_weight, gamma)):
            tid = level[j]
            c = hist[j, f].cumsum(axis=0)
            totals.setdefault(tid, (c[-1, 0], c[-1, 1]))
            if not gn > 0:
                continue  # no split gains anything: the node stays a leaf
            feature[tid], threshold[tid], split_bin[tid], gain[tid] = f, edges[f, b], b, gn
            for side, (G, H) in enumerate(((c[b, 0], c[b, 1]), (c[-1, 0] - c[b, 0], c[-1, 1] - c[b, 1]))):
                cid = len(feature)
                feature.append(-1), threshold.append(np.inf), split_bin.append(-1), left.append(-1)
                right.append(-1), value.append(0.0), gain.append(0.0)
                totals[cid] = (G, H)
                (left if side == 0 else right)[tid] = cid
                rows = (node == j) & ((binned[:, f] <= b) if side == 0 else (binned[:, f] > b))
                new_node[rows] = len(nxt)
                nxt.append(cid)
        node, level = new_node, nxt
        if not level:
            break
    for tid, (G, H) in totals.items():
        if feature[tid] < 0:
            value[tid] = -lr * G / (H + lam)
    return {"feature": np.array(feature), "threshold": np.array(threshold), "bin": np.array(split_bin),
            "left": np.array(left), "right": np.array(right), "value": np.array(value), "gain": np.array(gain)}


def predict_tree(tree: dict[str, np.ndarray], X: np.ndarray, binned: bool = False) -> np.ndarray:
    """Leaf value of every row: x <= threshold goes left (bin <= split bin when ``binned``)."""
    cut = tree["bin"] if binned else tree["threshold"]
    pos = np.zeros(len(X), dtype=np.int64)
    rows = np.arange(len(X))
    while True:
        f = tree["feature"][pos]
        inner = f >= 0
        if not inner.any():
            return tree["value"][pos]
        go_left = X[rows, np.maximum(f, 0)] <= cut[pos]
        pos = np.where(inner, np.where(go_left, tree["left"][pos], tree["right"][pos]), pos)


def _gradients(loss: str, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if loss == "squared":
        return raw - y, np.ones_like(raw)
    p = 1.0 / (1.0 + np.exp(-raw))
    return p - y, p * (1.0 - p)


def _check(X: Any, y: Any, loss: str, depth: int, lam: float, lr: float) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (len(X),):
        raise ValueError(f"boosting needs X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}")
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r} is not supported: choose one of {LOSSES}")
    if loss == "logistic" and not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("the logistic loss needs labels 0 or 1: map the classes to {0, 1} first")
    if not (isinstance(depth, (int, np.integer)) and depth >= 1 and lam >= 0 and lr > 0):
        raise ValueError(f"need depth >= 1, lam >= 0, lr > 0; got depth={depth!r}, lam={lam}, lr={lr}")
    return X, y


def _boost(X: np.ndarray, y: np.ndarray, edges: np.ndarray, reduce: Callable[[np.ndarray], np.ndarray],
           rounds: int, depth: int, lam: float, lr: float, loss: str, min_child_weight: float,
           gamma: float = 0.0) -> dict[str, Any]:
    binned = bin_data(X, edges)
    s = reduce(np.array([y.sum(), float(len(y))]))
    if s[1] == 0:
        raise ValueError("no rows on any rank: boosting needs at least one sample")
    mean = s[0] / s[1]
    base = mean if loss == "squared" else float(np.log(np.clip(mean, 1e-12, 1 - 1e-12) / np.clip(1 - mean, 1e-12, 1)))
    raw = np.full(len(y), base)
    trees = []
    for _ in range(int(rounds)):
        g, h = _gradients(loss, y, raw)
        tree = _grow(binned, g, h, edges, reduce, depth, lam, lr, min_child_weight, gamma)
        raw = raw + predict_tree(tree, binned, binned=True)
        trees.append(tree)
    return {"base": base, "trees": trees, "edges": edges, "loss": loss}


def train_booster(comm: Comm, X_shard: np.ndarray, y_shard: np.ndarray, rounds: int = 5, depth: int = 3,
                  bins: int = 32, lam: float = 1.0, lr: float = 0.3, loss: str = "squared",
                  min_child_weight: float = 1e-3, edges: np.ndarray | None = None, sample: int = 2048,
                  seed: int = 0, row_seconds: float = 0.0, gamma: float = 0.0) -> dict[str, Any]:
    """Per rank: gradient boosting with histograms summed by one ring all-reduce per tree level.

    Equal to ``reference_booster`` with the same edges (given, or from ``bin_edges``): same splits,
    predictions to float64 rounding. ``row_seconds`` charges simulated compute per row, feature, level.
    """
    X, y = _check(X_shard, y_shard, loss, depth, lam, lr)
    if edges is None:
        edges = bin_edges(comm, X, bins, sample, seed)

    def reduce(a: np.ndarray) -> np.ndarray:
        comm.compute(row_seconds * X.shape[0] * X.shape[1] if a.ndim > 1 else 0.0)
        return ring_allreduce(comm, a)

    return _boost(X, y, np.asarray(edges, dtype=np.float64), reduce, rounds, depth, lam, lr, loss, min_child_weight,
                  gamma)


def reference_booster(X: np.ndarray, y: np.ndarray, rounds: int = 5, depth: int = 3, bins: int = 32,
                      lam: float = 1.0, lr: float = 0.3, loss: str = "squared", min_child_weight: float = 1e-3,
                      edges: np.ndarray | None = None, gamma: float = 0.0) -> dict[str, Any]:
    """The same booster on one machine; edges default to ``quantile_edges(X, bins)`` (the whole data)."""
    X, y = _check(X, y, loss, depth, lam, lr)
    edges = quantile_edges(X, bins) if edges is None else np.asarray(edges, dtype=np.float64)
    return _boost(X, y, edges, lambda a: a, rounds, depth, lam, lr, loss, min_child_weight, gamma)


def predict(model: dict[str, Any], X: np.ndarray) -> np.ndarray:
    """Raw score base + sum of trees for the squared loss; the probability sigmoid(score) for logistic."""
    X = np.asarray(X, dtype=np.float64)
    raw = model["base"] + sum((predict_tree(t, X) for t in model["trees"]), np.zeros(len(X)))
    return raw if model["loss"] == "squared" else 1.0 / (1.0 + np.exp(-raw))


def histogram_bytes(nodes: int, d: int, bins: int, K: int, itemsize: int = 8) -> float:
    """Bytes one rank sends in the ring all-reduce of one level: 2 (K-1)/K * nodes d bins 2 numbers."""
    return 2 * (K - 1) / K * nodes * d * bins * 2 * itemsize


# --- LightGBM's data-parallel learner on local processes (Section 5): lightgbm imported in the child ------

def _lightgbm_rank(folder: str, rank: int) -> None:
    """Child process: train on shard ``rank`` of ``folder``; write the model string beside it."""
    import json
    import os

    import lightgbm as lgb

    job = json.loads(open(os.path.join(folder, "job.json")).read())
    shard = np.load(os.path.join(folder, f"shard{rank}.npz"))
    ports = job["ports"]
    p = dict(job["params"], tree_learner="data", num_machines=len(ports), local_listen_port=ports[rank],
             machines=",".join(f"127.0.0.1:{q}" for q in ports), pre_partition=True, time_out=1)
    data = lgb.Dataset(shard["X"], shard["y"], params={"max_bin": p.get("max_bin", 255)})
    booster = lgb.train(p, data, num_boost_round=job["rounds"])
    with open(os.path.join(folder, f"model{rank}.tmp"), "w") as f:
        f.write(booster.model_to_string())
    os.replace(os.path.join(folder, f"model{rank}.tmp"), os.path.join(folder, f"model{rank}.txt"))


def run_lightgbm_data_parallel(shards: list[tuple[np.ndarray, np.ndarray]], params: dict, rounds: int = 3,
                               timeout: float = 120.0) -> list[str]:
    """Train LightGBM with ``tree_learner="data"`` on len(shards) local processes, one shard each.

    Free ports per run, ``pre_partition=True``; returns each process's model string. A process that fails
    or a run longer than ``timeout`` raises RuntimeError, and every process is killed on the way out.
    """
    import json
    import os
    import socket
    import subprocess
    import sys
    import tempfile
    import time

    socks = [socket.socket() for _ in shards]
    ports = [s.bind(("127.0.0.1", 0)) or s.getsockname()[1] for s in socks]  # free now; LightGBM binds them next
    for s in socks:
        s.close()
    with tempfile.TemporaryDirectory(prefix="lgb-data-parallel-") as folder:
        for r, (X, y) in enumerate(shards):
            np.savez(os.path.join(folder, f"shard{r}.npz"), X=np.asarray(X), y=np.asarray(y))
        with open(os.path.join(folder, "job.json"), "w") as f:
            json.dump({"ports": ports, "params": params, "rounds": int(rounds)}, f)
        code = "import sys; from scaleoutai.ml.trees import _lightgbm_rank; _lightgbm_rank(sys.argv[1], int(sys.argv[2]))"
        logs = [open(os.path.join(folder, f"log{r}.txt"), "w") for r in range(len(shards))]
        procs: list[subprocess.Popen] = []
        try:
            for r in range(len(shards)):
                procs.append(subprocess.Popen([sys.executable, "-c", code, folder, str(r)], stdout=logs[r],
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            deadline = time.monotonic() + timeout
            while any(p.poll() is None for p in procs):
                failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
                if failed or time.monotonic() > deadline:
                    r = failed[0] if failed else None
                    tail = open(os.path.join(folder, f"log{r}.txt")).read()[-2000:] if failed else ""
                    raise RuntimeError(f"LightGBM rank {r} failed:\n{tail}" if failed else
                                       f"LightGBM data-parallel training did not finish in {timeout} s")
                time.sleep(0.05)
            bad = [r for r, p in enumerate(procs) if p.returncode != 0]
            if bad:
                raise RuntimeError(f"LightGBM rank {bad[0]} failed:\n{open(os.path.join(folder, f'log{bad[0]}.txt')).read()[-2000:]}")
            return [open(os.path.join(folder, f"model{r}.txt")).read() for r in range(len(shards))]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait(timeout=10)
            for f in logs:
                f.close()
