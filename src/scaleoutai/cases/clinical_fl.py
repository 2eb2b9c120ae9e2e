"""Federated training across hospital sites, and the metrics a clinic reads (Chapter 37).

Glue the case study needs of its own; the notebook passes the part code in as functions (the local
update: SGD or DP-SGD from Part III; the server's rule: a robust aggregator from Part VII; the secure
sum: masking from Part III), so this module imports only the shared layers.

Protocol (``train_sites``), rank 0 the coordinator, sites 0..S-1 on ranks 1..K-1 in contiguous blocks
(one site per rank when K = S + 1; with K = 1 the coordinator hosts every site). Round t:

    the coordinator sends w_t to every live rank hosting a site;
    site k computes w_k = local_update(w_t, X_k, y_k, t, k) (a faulty site sends corrupt[k](w_t, w_k));
    each rank answers with ONE message, the rows [k, n_k, w_k] of its sites (empty if w_t was lost);
    w_{t+1} = w_t + combine(D, n),   D the (m, P) stack of updates w_k - w_t in site order, n their sizes.

``combine`` is the weighted mean sum_k n_k d_k / sum_k n_k (FedAvg) or any rule over the stack (the
coordinate-wise median, trimmed mean, Krum). A rank that crashed (PeerCrashedError) is excluded from then
on; a report lost on the link (MessageLostError) drops those sites for that round only; a round with no
report keeps w_t. The coordinator knows whom it waits for: each live rank, in rank order.

With ``secure_sum`` (one site per rank), each site sends [n_k (w_k - w_t), n_k] through the masking
protocol and the coordinator learns only the two sums, hence only the weighted mean (no faults in
this mode: a dropped site is handled inside one masking round, not across rounds).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import cluster, nn
from ..cluster import Comm
from ..collectives import worker_range
from ..datasets import clinical as clinical_data
from ..errors import MessageLostError, PeerCrashedError

__all__ = ["standardise", "risk_scores", "naive_auroc", "auroc", "calibration_error", "evaluate_sites",
           "weighted_mean", "reference_sites", "train_sites", "run_sites"]

Sites = list[tuple[np.ndarray, np.ndarray]]
LocalUpdate = Callable[[np.ndarray, np.ndarray, np.ndarray, int, int], np.ndarray]
Combine = Callable[[np.ndarray, np.ndarray], np.ndarray]


# --- metrics ------------------------------------------------------------------------------------------

def standardise(X: np.ndarray) -> np.ndarray:
    """(x_j - centre_j) / scale_j with the consortium's reference ranges (creatinine on a log scale).

    Fixed constants, agreed before training, so no site reveals its own means (Section 3)."""
    X = np.asarray(X, dtype=np.float64)
    ref = clinical_data.REFERENCE
    if X.ndim != 2 or X.shape[1] != len(ref):
        raise ValueError(f"X must be (n, {len(ref)}) in the order of datasets.clinical.FEATURES, got {X.shape}")
    S = (X - ref[:, 0]) / ref[:, 1]
    S[:, 4] = np.log(np.maximum(X[:, 4], 1e-3) / ref[4, 0]) / 0.3
    return S


def risk_scores(w: np.ndarray, like: nn.Params, X: np.ndarray) -> np.ndarray:
    """P(y = 1 | x) of a two-output ``nn`` model: softmax(logits)[:, 1] = sigmoid(z_1 - z_0)."""
    logits, _ = nn.mlp_forward(nn.unflatten(w, like), X)
    if logits.shape[-1] != 2:
        raise ValueError(f"risk_scores needs a model with 2 outputs (no event, event), got {logits.shape[-1]}")
    z = (logits[:, 1] - logits[:, 0]).astype(np.float64)
    e = np.exp(-np.abs(z))  # never overflows, even for a model wrecked by an attack
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _binary(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s, y = np.asarray(scores, dtype=np.float64).reshape(-1), np.asarray(labels).reshape(-1)
    if len(s) != len(y) or not np.all((y == 0) | (y == 1)):
        raise ValueError(f"need as many scores as labels ({len(s)} vs {len(y)}) and labels in {{0, 1}}")
    if y.min(initial=1) == y.max(initial=0):
        raise ValueError("AUROC needs at least one positive and one negative: this site's set has one class only")
    return s, y.astype(bool)


def naive_auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(s_pos > s_neg) + P(s_pos = s_neg) / 2 over every positive-negative pair: O(n_pos n_neg)."""
    s, y = _binary(scores, labels)
    pos, neg = s[y][:, None], s[~y][None, :]
    return float((np.sum(pos > neg) + 0.5 * np.sum(pos == neg)) / (pos.size * neg.size))


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann-Whitney: AUROC = (R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg), R_pos the sum of the
    positives' ranks, tied scores sharing their mean rank. O(n log n); equals ``naive_auroc``."""
    s, y = _binary(scores, labels)
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    mid = np.cumsum(counts) - (counts - 1) / 2.0  # the mean rank (1-based) of each group of equal scores
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    return float((mid[inverse][y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: sum_b (n_b / n) |mean(p in b) - mean(y in b)|, ``bins`` equal-width bins
    of [0, 1] (a probability on an inner edge goes to the lower bin, as scikit-learn's calibration_curve)."""
    p, y = np.asarray(probs, dtype=np.float64).reshape(-1), np.asarray(labels, dtype=np.float64).reshape(-1)
    if len(p) != len(y) or len(p) == 0 or int(bins) != bins or bins < 1:
        raise ValueError(f"need equal, non-zero numbers of probabilities and labels and bins >= 1, "
                         f"got {len(p)}, {len(y)}, bins={bins!r}")
    b = np.searchsorted(np.linspace(0.0, 1.0, int(bins) + 1)[1:-1], p)
    gap = np.bincount(b, weights=p, minlength=bins) - np.bincount(b, weights=y, minlength=bins)
    return float(np.abs(gap).sum() / len(p))


def evaluate_sites(w: np.ndarray, like: nn.Params, sites: Sites) -> dict[str, Any]:
    """Per-site and pooled accuracy (threshold 1/2), AUROC and calibration error; the worst site's AUROC."""
    rows = []
    for k, (X, y) in enumerate(sites):
        p = risk_scores(w, like, X)
        rows.append({"site": k, "n": len(y), "prevalence": float(np.mean(y)), "accuracy": float(np.mean((p > 0.5) == y)),
                     "auroc": auroc(p, y), "ece": calibration_error(p, y), "scores": p})
    p_all, y_all = np.concatenate([r["scores"] for r in rows]), np.concatenate([y for _, y in sites])
    pooled = {"accuracy": float(np.mean((p_all > 0.5) == y_all)), "auroc": auroc(p_all, y_all),
              "ece": calibration_error(p_all, y_all)}
    return {"sites": rows, "pooled": pooled, "worst_auroc": min(r["auroc"] for r in rows),
            "worst_accuracy": min(r["accuracy"] for r in rows)}


# --- the federated protocol -----------------------------------------------------------------------------

def weighted_mean(updates: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sum_k n_k d_k / sum_k n_k in float64 (FedAvg's rule on updates); zeros when sum_k n_k = 0."""
    n = np.asarray(counts, dtype=np.float64).reshape(-1)
    D = np.asarray(updates, dtype=np.float64)
    return np.zeros(D.shape[1]) if n.sum() == 0 else (n @ D) / n.sum()



def _reports(w: np.ndarray, sites: Sites, mine: list[int], t: int, local_update: LocalUpdate,
             corrupt: dict[int, Callable[..., np.ndarray]]) -> list[tuple[int, int, np.ndarray]]:
    out = []
    for k in mine:
        X, y = sites[k]
        w_k = np.asarray(local_update(w, X, y, t, k), dtype=w.dtype)
        if k in corrupt:  # a broken scanner or a poisoned site: what it sends, not what it computed
            w_k = np.asarray(corrupt[k](w, w_k), dtype=w.dtype)
        out.append((k, len(X), w_k))
    return out


def _step(w: np.ndarray, reports: list[tuple[int, int, np.ndarray]], combine: Combine) -> np.ndarray:
    if not reports:
        return w.copy()
    reports = sorted(reports, key=lambda r: r[0])  # site order: the same stack on every K
    D = np.stack([m.astype(np.float64) - w for _, _, m in reports])
    delta = np.asarray(combine(D, np.array([n for _, n, _ in reports], dtype=np.float64)), dtype=np.float64)
    return (w.astype(np.float64) + delta).astype(w.dtype)


def _check(sites: Sites, rounds: int) -> None:
    if not sites or any(len(X) != len(y) for X, y in sites):
        raise ValueError("sites must be a non-empty list of (X_k, y_k) with as many labels as rows")
    if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")


def reference_sites(w0: np.ndarray, sites: Sites, rounds: int, local_update: LocalUpdate,
                    combine: Combine = weighted_mean, corrupt: dict | None = None, crashed: dict[int, int] | None = None,
                    lost: set[tuple[int, int]] | frozenset = frozenset(), keep_models: bool = False
                    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """One machine, the definition ``train_sites`` reproduces: site k reports in round t unless
    t >= crashed[k] or (k, t) is in ``lost``. Returns (w, history)."""
    _check(sites, rounds)
    w, history, crashed = np.array(w0, copy=True), [], dict(crashed or {})
    for t in range(int(rounds)):
        alive = [k for k in range(len(sites)) if t < crashed.get(k, rounds + 1)]
        reps = _reports(w, sites, [k for k in alive if (k, t) not in lost], t, local_update, dict(corrupt or {}))
        w = _step(w, reps, combine)
        history.append({"round": t, "reported": sorted(r[0] for r in reps),
                        "dead": sorted(set(range(len(sites))) - set(alive)), **({"w": w.copy()} if keep_models else {})})
    return w, history


def train_sites(comm: Comm, w0: np.ndarray, sites: Sites, rounds: int, local_update: LocalUpdate,
                combine: Combine = weighted_mean, corrupt: dict | None = None,
                secure_sum: Callable[..., Any] | None = None, seconds_per_sample: float = 0.0,
                keep_models: bool = False) -> tuple[np.ndarray | None, list[dict[str, Any]]]:
    """Per rank: federated rounds across sites (see the module). ``secure_sum(comm, x, t)`` is a masking
    protocol (``ml.secure_agg.secure_aggregate``) returning the survivors' sum on rank 0. Returns
    (w, history) on rank 0, (None, []) elsewhere; compute is charged as ``seconds_per_sample`` n_k."""
    _check(sites, rounds)
    S, K, r, corrupt = len(sites), comm.size, comm.rank, dict(corrupt or {})
    if secure_sum is not None and (K != S + 1 or combine is not weighted_mean):
        raise ValueError(f"secure aggregation needs one site per rank (K = {S + 1}, got {K}) and combine="
                         "weighted_mean: the coordinator sees only the sum, so no robust rule can run")
    w, P = np.array(w0, copy=True), np.size(w0)
    if r != 0:
        mine = list(worker_range(S, K, r))
        for t in range(int(rounds) if mine else 0):
            try:
                w = comm.recv(0)
            except MessageLostError:  # the model never came: report nothing this round
                comm.send(np.zeros((0, 2 + P)), 0)
                continue
            reps = _reports(w, sites, mine, t, local_update, corrupt)
            comm.compute(seconds_per_sample * sum(n for _, n, _ in reps))
            if secure_sum is not None:
                (k, n, m), = reps
                secure_sum(comm, np.concatenate([n * (m.astype(np.float64) - w), [n]]), t)
            else:
                comm.send(np.array([[k, n, *m.astype(np.float64)] for k, n, m in reps]).reshape(-1, 2 + P), 0)
        return None, []
    history, dead = [], set()
    for t in range(int(rounds)):
        reps = _reports(w, sites, list(worker_range(S, K, 0)), t, local_update, corrupt)
        comm.compute(seconds_per_sample * sum(n for _, n, _ in reps))
        ranks = [q for q in range(1, K) if q not in dead and len(worker_range(S, K, q))]
        for q in ranks:
            comm.send(w, q)
        log: dict[str, Any] = {"round": t}
        if secure_sum is not None:
            out = secure_sum(comm, np.zeros(P + 1), t)
            total = out["value"]
            delta = total[:P] / total[P] if total[P] > 0 else np.zeros(P)
            w = (w.astype(np.float64) + delta).astype(w.dtype)
            log.update(reported=[q - 1 for q in out["survivors"]], masked={q - 1: v for q, v in out["seen"].items()})
        else:
            for q in ranks:
                try:
                    rows = comm.recv(q)
                except PeerCrashedError:  # fail-stop: this rank's sites never report again
                    dead.add(q)
                    continue
                except MessageLostError:  # lost on the link: these sites miss this round only
                    continue
                hosted = set(worker_range(S, K, q))
                if rows.ndim != 2 or rows.shape[1] != 2 + P or not {int(k) for k in rows[:, 0]} <= hosted:
                    raise ValueError(f"rank {q} sent a malformed report of shape {rows.shape} for sites {sorted(hosted)}")
                reps += [(int(row[0]), int(row[1]), row[2:].astype(w.dtype)) for row in rows]
            w = _step(w, reps, combine)
            log["reported"] = sorted(k for k, _, _ in reps)
        log["dead"] = sorted(k for q in dead for k in worker_range(S, K, q))
        if keep_models:
            log["w"] = w.copy()
        history.append(log)
    return w, history


def run_sites(w0: np.ndarray, sites: Sites, rounds: int, local_update: LocalUpdate, K: int | None = None,
              faults: Any = None, network: Any = None, timeout: float = 120.0, **kwargs: Any
              ) -> tuple[np.ndarray, list[dict[str, Any]], Any]:
    """Driver: ``train_sites`` on K ranks (default one site per rank, K = S + 1) on the simulator."""
    res = cluster.run(train_sites, len(sites) + 1 if K is None else K, args=(w0, sites, rounds, local_update),
                      kwargs=kwargs, faults=faults, network=network, timeout=timeout)
    w, history = res.values[0]
    return w, history, res
