"""Chapter 10: gradient compression. Top-k, QSGD, PowerSGD, each with or without error feedback.

``compressed_allreduce(comm, grad, compressor, state)`` returns the average over ranks of what the
compressor lets through, and the same on every rank. With error feedback a rank compresses
p = g + e and keeps the residual e <- p - C(p) for the next step (Seide et al. 2014; Karimireddy et al.
2019), so nothing is lost, only delayed. Bytes per rank and step (ring collectives, Section 3):

    dense     ring all-reduce of n values           ~ 2 (K-1)/K n itemsize
    top-k     all-gather of k (index, value) pairs  (K-1) k (4 + itemsize)
    QSGD      all-gather of a norm + n levels       (K-1) (itemsize + n b), b = 1 byte for s <= 127
    PowerSGD  ring all-reduce of P, then of Q        ~ 2 (K-1)/K r (n + m) itemsize per n x m matrix

``*_bytes`` give them exactly, per rank, as the communicator counts them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..cluster import Comm
from ..collectives import all_gather, block_bounds, block_range, ring_allreduce
from .optimization import Model

__all__ = ["Dense", "TopK", "QSGD", "PowerSGD", "topk_compress", "topk_decompress", "qsgd_quantize",
           "qsgd_dequantize", "orthogonalize", "compressed_allreduce", "reference_compressed_allreduce",
           "ring_allreduce_bytes", "all_gather_bytes", "step_bytes", "qsgd_paper_bits", "train_compressed_sgd",
           "reference_compressed_sgd", "qsgd_variance_bound", "qsgd_variance", "qsgd_moments", "topk_contraction",
           "ef_residual_bound", "reference_ef_trace"]


@dataclass(frozen=True)
class Dense:
    """No compression: one ring all-reduce, divided by K."""

    error_feedback: bool = False


@dataclass(frozen=True)
class TopK:
    """Keep the k entries of largest |value| (ties: lower index first)."""

    k: int
    error_feedback: bool = False


@dataclass(frozen=True)
class QSGD:
    """Stochastic quantization to s levels (Alistarh et al. 2017): unbiased, E[Q(v)] = v."""

    s: int
    error_feedback: bool = False
    seed: int = 0


@dataclass(frozen=True)
class PowerSGD:
    """Rank-r power iteration per matrix (Vogels et al. 2019). ``shapes`` lays the flat gradient out in
    pieces; 2-D pieces are compressed, 1-D ones (biases) go dense, as torch's powerSGD_hook does.
    ``warm_start`` reuses last step's Q; the first Q is drawn from ``seed``, the same on every rank."""

    rank: int
    shapes: tuple[tuple[int, ...], ...]
    error_feedback: bool = False
    warm_start: bool = True
    seed: int = 0


Compressor = Dense | TopK | QSGD | PowerSGD


# --- the compressors themselves -------------------------------------------------------------------

def topk_compress(vec: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(idx int32, vals): the k entries of largest |vec|, ties broken by index, returned in index order."""
    vec = np.asarray(vec)
    if vec.ndim != 1:
        raise ValueError(f"topk_compress takes a flat vector, got shape {vec.shape}: ravel() it first")
    if int(k) != k or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k}")
    k = min(int(k), vec.size)
    idx = np.sort(np.argsort(-np.abs(vec), kind="stable")[:k]).astype(np.int32)
    return idx, vec[idx].copy()


def topk_decompress(idx: np.ndarray, vals: np.ndarray, n: int) -> np.ndarray:
    """The dense vector of length n holding ``vals`` at ``idx`` (repeated indices add up)."""
    out = np.zeros(n, dtype=vals.dtype)
    np.add.at(out, idx, vals)
    return out


def qsgd_quantize(vec: np.ndarray, s: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(norm, levels): level_i = sign(v_i) xi_i with xi_i = floor(s |v_i|/||v||) + Bernoulli(frac part),
    so Q(v) = ||v|| level / s has E[Q(v)] = v. Levels are int8 (s <= 127) or int16."""
    if int(s) != s or not 1 <= s <= 32767:
        raise ValueError(f"QSGD needs an integer number of levels 1 <= s <= 32767, got {s}")
    norm = np.linalg.norm(vec)
    ltype = np.int8 if s <= 127 else np.int16
    if norm == 0:
        return np.array([norm], dtype=vec.dtype), np.zeros(vec.size, dtype=ltype)
    scaled = np.abs(vec) / norm * s
    low = np.floor(scaled)
    xi = low + (rng.random(vec.size) < (scaled - low))
    return np.array([norm], dtype=vec.dtype), (np.sign(vec) * xi).astype(ltype)


def qsgd_dequantize(norm: np.ndarray, levels: np.ndarray, s: int) -> np.ndarray:
    return (norm[0] / s) * levels.astype(norm.dtype)


def orthogonalize(M: np.ndarray) -> np.ndarray:
    """An orthonormal basis of M's columns (reduced QR). Only the span matters: P P^T is the same
    for Gram-Schmidt, which torch uses for r <= 2."""
    return np.linalg.qr(M)[0].astype(M.dtype, copy=False)


# --- bytes ----------------------------------------------------------------------------------------

def ring_allreduce_bytes(n: int, K: int, r: int, itemsize: int) -> int:
    """Bytes rank r sends in ``ring_allreduce`` of n items: every block but its own (reduce-scatter),
    then every block but rank r+1's (all-gather)."""
    sizes = [hi - lo for lo, hi in block_bounds(n, K)]
    return 0 if K == 1 else itemsize * (2 * n - sizes[r] - sizes[(r + 1) % K])


def all_gather_bytes(nbytes: Sequence[int], r: int) -> int:
    """Bytes rank r sends in ``all_gather`` when rank q contributes nbytes[q]: all but rank r+1's."""
    K = len(nbytes)
    return 0 if K == 1 else sum(nbytes) - nbytes[(r + 1) % K]


def qsgd_paper_bits(n: int, s: int) -> int:
    """Alistarh et al. 2017, plain encoding: 32 bits of norm + n (1 sign bit + ceil(log2(s+1)) level bits).
    Our encoding spends a whole byte (int8) per entry instead: simpler, at most 8/(1+ceil(log2(s+1)))x more."""
    return 32 + n * (1 + int(np.ceil(np.log2(s + 1))))


def _pieces(shapes: Sequence[tuple[int, ...]], n: int) -> list[tuple[int, tuple[int, ...]]]:
    offsets, off = [], 0
    for sh in shapes:
        offsets.append((off, tuple(int(x) for x in sh)))
        off += int(np.prod(sh))
    if off != n:
        raise ValueError(f"PowerSGD shapes hold {off} values but the gradient has {n}: give Model.shapes()")
    return offsets


def _psgd_layout(c: PowerSGD, n: int) -> tuple[list, list, int, int]:
    mats = [(o, sh) for o, sh in _pieces(c.shapes, n) if len(sh) == 2]
    vecs = [(o, sh) for o, sh in _pieces(c.shapes, n) if len(sh) != 2]
    nP = sum(sh[0] * min(c.rank, *sh) for _, sh in mats)
    nQ = sum(sh[1] * min(c.rank, *sh) for _, sh in mats)
    return mats, vecs, nP, nQ


def step_bytes(compressor: Compressor, n: int, K: int, r: int, itemsize: int) -> int:
    """Exactly the bytes rank r sends in one ``compressed_allreduce`` of an n-vector (the formulas above)."""
    if isinstance(compressor, Dense):
        return ring_allreduce_bytes(n, K, r, itemsize)
    if isinstance(compressor, TopK):
        k = min(compressor.k, n)
        return all_gather_bytes([4 * k] * K, r) + all_gather_bytes([itemsize * k] * K, r)
    if isinstance(compressor, QSGD):
        b = 1 if compressor.s <= 127 else 2
        return all_gather_bytes([itemsize] * K, r) + all_gather_bytes([b * n] * K, r)
    mats, vecs, nP, nQ = _psgd_layout(compressor, n)
    dense = sum(int(np.prod(sh)) for _, sh in vecs)
    return sum(ring_allreduce_bytes(m, K, r, itemsize) for m in (dense, nP, nQ) if m or not mats)


# --- the collective -------------------------------------------------------------------------------

def _check_grad(grad: Any) -> np.ndarray:
    if not isinstance(grad, np.ndarray) or grad.ndim != 1 or grad.dtype.kind != "f":
        raise TypeError("compressed_allreduce takes a flat float NumPy gradient (nn.flatten or Model.loss_grad)")
    return grad


def _powersgd(comm: Comm, p: np.ndarray, c: PowerSGD, state: dict) -> np.ndarray:
    K = comm.size
    mats, vecs, nP, nQ = _psgd_layout(c, p.size)
    out = np.empty_like(p)
    if vecs or not mats:
        dense = np.concatenate([p[o:o + int(np.prod(sh))] for o, sh in vecs]) if vecs else p[:0]
        dense = ring_allreduce(comm, dense) / K
        at = 0
        for o, sh in vecs:
            size = int(np.prod(sh))
            out[o:o + size], at = dense[at:at + size], at + size
    if not mats:
        return out
    Ms = [p[o:o + sh[0] * sh[1]].reshape(sh) for o, sh in mats]
    Qs = state.get("q")
    if Qs is None or not c.warm_start:
        rng = state.setdefault("q_rng", np.random.default_rng(c.seed))  # same seed: same Q on every rank
        Qs = [rng.standard_normal((sh[1], min(c.rank, *sh))).astype(p.dtype) for _, sh in mats]
    Qs = [orthogonalize(Q) for Q in Qs]
    Ps = ring_allreduce(comm, np.concatenate([(M @ Q).ravel() for M, Q in zip(Ms, Qs)]))  # sum_k M_k Q
    Ps_, at = [], 0
    for M, Q in zip(Ms, Qs):
        size = M.shape[0] * Q.shape[1]
        Ps_.append(orthogonalize(Ps[at:at + size].reshape(M.shape[0], Q.shape[1])))
        at += size
    Qn = ring_allreduce(comm, np.concatenate([(M.T @ P).ravel() for M, P in zip(Ms, Ps_)])) / K
    new_Q, at = [], 0
    for (o, sh), P, Q in zip(mats, Ps_, Qs):
        size = Q.size
        Qk = Qn[at:at + size].reshape(Q.shape)
        new_Q.append(Qk)
        out[o:o + sh[0] * sh[1]] = (P @ Qk.T).ravel()  # P P^T (mean_k M_k)
        at += size
    state["q"] = new_Q
    assert at == nQ and sum(P.size for P in Ps_) == nP
    return out


def compressed_allreduce(comm: Comm, grad: np.ndarray, compressor: Compressor, state: dict) -> np.ndarray:
    """The average over ranks of the compressed gradients, on every rank (Section 4).

    ``state`` is this rank's memory across steps (a dict, start with {}): the error-feedback residual
    under "residual", PowerSGD's Q, QSGD's generator. Dense: ring all-reduce / K. Top-k and QSGD: an
    all-gather of every rank's compressed message (sparse and quantized vectors do not add up in a
    ring without being expanded), then each rank decodes and averages. PowerSGD: see ``PowerSGD``."""
    p = _check_grad(grad)
    K = comm.size
    if compressor.error_feedback:
        p = p + state.get("residual", 0)
    if isinstance(compressor, Dense):
        avg = ring_allreduce(comm, p) / K
        mine = avg
    elif isinstance(compressor, TopK):
        idx, vals = topk_compress(p, compressor.k)
        all_idx, all_vals = all_gather(comm, idx), all_gather(comm, vals)
        avg = topk_decompress(all_idx, all_vals, p.size) / K
        mine = topk_decompress(idx, vals, p.size)
    elif isinstance(compressor, QSGD):
        rng = state.setdefault("rng", np.random.default_rng([compressor.seed, comm.rank]))
        norm, levels = qsgd_quantize(p, compressor.s, rng)
        norms, all_levels = all_gather(comm, norm), all_gather(comm, levels).reshape(K, p.size)
        avg = sum(qsgd_dequantize(norms[q:q + 1], all_levels[q], compressor.s) for q in range(K)) / K
        mine = qsgd_dequantize(norm, levels, compressor.s)
    elif isinstance(compressor, PowerSGD):
        avg = _powersgd(comm, p, compressor, state)
        mine = avg  # PowerSGD's residual is against the shared approximation (Vogels et al., torch)
    else:
        raise TypeError(f"compressor must be Dense, TopK, QSGD or PowerSGD, got {type(compressor).__name__}")
    if compressor.error_feedback:
        state["residual"] = p - mine
    return avg.astype(grad.dtype, copy=False)


def reference_compressed_allreduce(grads: Sequence[np.ndarray], compressor: Compressor,
                                   states: Sequence[dict]) -> np.ndarray:
    """One machine, K gradients: (1/K) sum_k C(g_k + e_k), updating each states[k] as rank k would.
    Written without messages, for top-k, QSGD and dense (PowerSGD's reference is the dense product
    P P^T mean(M) checked in the tests)."""
    K = len(grads)
    if isinstance(compressor, PowerSGD):
        raise TypeError("reference_compressed_allreduce covers Dense, TopK and QSGD")
    total = np.zeros_like(grads[0])
    for k, (g, st) in enumerate(zip(grads, states)):
        p = g + st.get("residual", 0) if compressor.error_feedback else g
        if isinstance(compressor, TopK):
            c = topk_decompress(*topk_compress(p, compressor.k), p.size)
        elif isinstance(compressor, QSGD):
            rng = st.setdefault("rng", np.random.default_rng([compressor.seed, k]))
            c = qsgd_dequantize(*qsgd_quantize(p, compressor.s, rng), compressor.s)
        else:
            c = p
        if compressor.error_feedback:
            st["residual"] = p - c
        total = total + c
    return total / K


def _scaled_grad(model: Model, w: np.ndarray, X: np.ndarray, y: np.ndarray, K: int, r: int) -> np.ndarray:
    """K G_r / N: its plain mean over ranks is the full-batch gradient, uneven and empty shards included."""
    lo, hi = block_range(len(y), K, r)
    return model.loss_grad(w, X[lo:hi], y[lo:hi])[1] * (K / len(y))


def train_compressed_sgd(comm: Comm, X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int,
                         lr: float, compressor: Compressor) -> tuple[np.ndarray, list[np.ndarray]]:
    """Full-batch SGD on rank r's contiguous block of rows with a compressed average of the gradients.
    Returns the final w and w after every step (the same on every rank)."""
    if len(X) != len(y) or len(y) == 0:
        raise ValueError(f"X and y need the same, non-zero number of rows, got {len(X)} and {len(y)}")
    state: dict = {}
    w, ws = w0.copy(), [w0.copy()]
    for _ in range(steps):
        g = compressed_allreduce(comm, _scaled_grad(model, w, X, y, comm.size, comm.rank), compressor, state)
        w = w - lr * g
        ws.append(w)
    return w, ws


def reference_compressed_sgd(X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int, lr: float,
                             compressor: Compressor, K: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """``train_compressed_sgd`` on one machine: K shards, K states, ``reference_compressed_allreduce``."""
    states: list[dict] = [{} for _ in range(K)]
    w, ws = w0.copy(), [w0.copy()]
    for _ in range(steps):
        grads = [_scaled_grad(model, w, X, y, K, r) for r in range(K)]
        w = w - lr * reference_compressed_allreduce(grads, compressor, states)
        ws.append(w)
    return w, ws


# --- convergence (Section 4, "What the theory promises") -------------------------------------------

def qsgd_variance_bound(d: int, s: int) -> float:
    """Alistarh et al. 2017, Lemma 3.1: E ||Q_s(v) - v||^2 <= min(d / s^2, sqrt(d) / s) ||v||^2 for v in R^d.
    Returns the factor in front of ||v||^2."""
    if d < 1 or s < 1:
        raise ValueError(f"need d >= 1 and s >= 1, got d = {d}, s = {s}")
    return float(min(d / s ** 2, np.sqrt(d) / s))


def qsgd_variance(vec: np.ndarray, s: int) -> float:
    """The exact E ||Q_s(v) - v||^2: entry i is rounded between two levels ||v||/s apart with probability
    p_i = frac(s |v_i| / ||v||), so the variance is (||v|| / s)^2 sum_i p_i (1 - p_i)."""
    vec = np.asarray(vec, dtype=np.float64)
    norm = float(np.linalg.norm(vec))
    if norm == 0:
        return 0.0
    scaled = np.abs(vec) / norm * s
    p = scaled - np.floor(scaled)
    return (norm / s) ** 2 * float(np.sum(p * (1 - p)))


def qsgd_moments(vec: np.ndarray, s: int, trials: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Monte-Carlo over ``trials`` seeds (seed, i) of ``qsgd_quantize``: the mean of Q(v) (-> v, unbiased)
    and the mean of ||Q(v) - v||^2 (<= qsgd_variance_bound(d, s) ||v||^2)."""
    vec = np.asarray(vec, dtype=np.float64)
    total, sq = np.zeros_like(vec), 0.0
    for i in range(trials):
        q = qsgd_dequantize(*qsgd_quantize(vec, s, np.random.default_rng([seed, i])), s)
        total += q
        sq += float(np.sum((q - vec) ** 2))
    return total / trials, sq / trials


def topk_contraction(d: int, k: int) -> float:
    """delta of top-k as a delta-contraction, ||C(x) - x||^2 <= (1 - delta) ||x||^2: delta = k / d
    (the d - k smallest entries carry at most a (d - k) / d share of ||x||^2)."""
    if not 0 <= k <= d or d < 1:
        raise ValueError(f"need 0 <= k <= d and d >= 1, got k = {k}, d = {d}")
    return k / d


def ef_residual_bound(delta: float, grad_norm: float) -> float:
    """Karimireddy et al. 2019, Lemma 3 (step size outside the compressor): with a delta-contraction and
    gradients ||g_t|| <= G, the error-feedback residual stays bounded, ||e_t||^2 <= 4 (1 - delta) / delta^2 G^2."""
    if not 0 < delta <= 1:
        raise ValueError(f"delta must be in (0, 1], got {delta}")
    return 4.0 * (1.0 - delta) / delta ** 2 * float(grad_norm) ** 2


def reference_ef_trace(X: np.ndarray, y: np.ndarray, model: Model, w0: np.ndarray, steps: int, lr: float,
                       compressor: Compressor, K: int) -> dict[str, Any]:
    """``reference_compressed_sgd`` that also records, per step and rank, ||g_r|| and the residual ||e_r||
    after the step (zeros without error feedback). Keys: "ws" (w_0..w_T), "grad_norms", "residual_norms"."""
    states: list[dict] = [{} for _ in range(K)]
    w, ws, gn, en = w0.copy(), [w0.copy()], [], []
    for _ in range(steps):
        grads = [_scaled_grad(model, w, X, y, K, r) for r in range(K)]
        w = w - lr * reference_compressed_allreduce(grads, compressor, states)
        ws.append(w)
        gn.append([float(np.linalg.norm(g)) for g in grads])
        en.append([float(np.linalg.norm(st.get("residual", 0.0))) for st in states])
    return {"ws": ws, "grad_norms": np.array(gn), "residual_norms": np.array(en)}
