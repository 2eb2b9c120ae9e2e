"""Split inference on an edge-fog-cloud chain, and int8 compression of the edge half (Chapter 34, Sections 2-4).

An MLP of L layers (``nn.mlp_init``: ReLU after every layer but the last) runs as a chain of tiers, rank 0
the edge device that holds the input, rank K-1 the farthest server. ``cuts`` (K-1 non-decreasing layer
indices) give tier r the layers [c_r, c_{r+1}) with c_0 = 0, c_K = L. A tier with no layers is not used
(rank 0 always is: the input lives there); each used tier sends its output to the next used tier. With a
batch of n rows, layer i costs 2 n d_i d_{i+1} FLOPs (matrix products only; bias and ReLU are ignored) and
the activation at cut c is n d_c float32 numbers (4 n d_c bytes) or n d_c int8 codes plus one float32 scale
(n d_c + 4 bytes). On links of latency alpha and time per byte beta (bandwidth 1/beta):

    T(cuts) = sum over used tiers r of FLOPs(r) / F_r + sum over hops of (alpha + bytes(cut) beta).

For two tiers (edge, server) and one cut c this is Neurosurgeon's (Kang et al. 2017) latency
T(c) = edge_time(c) + alpha + bytes(c) beta + server_time(c), and T(L) = edge_time(L): nothing crosses.
The result stays on the last used tier. int8: symmetric, per output channel for weights
(s_j = max_i |W_ij| / 127, q = round(W / s)), per tensor for activations; the int8 product accumulates
exactly (integer sums, here in float64, which is exact below 2^53) and is rescaled by s_x s_j.
"""
from __future__ import annotations

from itertools import combinations_with_replacement
from typing import Any

import numpy as np

from .. import cluster, nn
from ..cluster import Comm

__all__ = ["ACTS", "widths", "layer_flops", "cut_bytes", "stage_bounds", "chain_time", "split_time", "best_cut",
           "best_cuts", "forward_layers", "quantize_per_channel", "quantize_activation", "pack_int8", "unpack_int8",
           "quantize_mlp", "int8_forward_layers", "reference_split_inference", "split_inference",
           "run_split_inference", "fit_mlp", "accuracy", "torch_layers", "export_onnx"]

ACTS = ("float32", "int8")
Q = 127.0  # symmetric "restricted" int8 levels [-127, 127], as onnxruntime's int8 weights


def _act(act: str) -> str:
    if act not in ACTS:
        raise ValueError(f"act={act!r} is not an activation format: choose one of {ACTS}")
    return act


def widths(params: nn.Params) -> list[int]:
    """Layer widths [d_0, ..., d_L] of an ``nn.mlp_init`` parameter dict."""
    L = 0
    while f"W{L}" in params:
        L += 1
    if L == 0:
        raise ValueError("params has no W0: pass an nn.mlp_init(...) parameter dict")
    return [params["W0"].shape[0]] + [params[f"W{i}"].shape[1] for i in range(L)]


def layer_flops(sizes: list[int], batch: int) -> np.ndarray:
    """FLOPs of each layer for ``batch`` rows: 2 n d_i d_{i+1} (one multiply and one add per weight and row)."""
    return np.array([2.0 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:])])


def cut_bytes(sizes: list[int], cut: int, batch: int, act: str = "float32") -> int:
    """Bytes of the activation at ``cut`` (the input of layer ``cut``): 4 n d_c, or n d_c + 4 in int8."""
    n = batch * sizes[cut]
    return 4 * n if _act(act) == "float32" else n + 4


def stage_bounds(cuts: Any, L: int) -> list[int]:
    """[0, c_1, ..., c_{K-1}, L]: tier r runs layers [bounds[r], bounds[r+1])."""
    cuts = [int(c) for c in cuts]
    bounds = [0, *cuts, L]
    if any(a > b for a, b in zip(bounds[:-1], bounds[1:])):
        raise ValueError(f"cuts {cuts} must be non-decreasing layer indices in [0, {L}]")
    return bounds


def _used(bounds: list[int]) -> list[int]:
    """Ranks that run something; rank 0 always (it holds the input)."""
    return [r for r in range(len(bounds) - 1) if r == 0 or bounds[r + 1] > bounds[r]]


def chain_time(sizes: list[int], cuts: Any, batch: int, flops: Any, alpha: float, beta: float,
               act: str = "float32") -> float:
    """T(cuts) = sum_r FLOPs(r) / F_r + sum over hops (alpha + bytes beta), in the simulator's order of additions."""
    L = len(sizes) - 1
    bounds, per_layer = stage_bounds(cuts, L), layer_flops(sizes, batch)
    if len(flops) != len(bounds) - 1:
        raise ValueError(f"flops lists one FLOP/s per tier: {len(bounds) - 1} tiers, got {len(flops)}")
    t = 0.0
    used = _used(bounds)
    for j, r in enumerate(used):
        t += float(per_layer[bounds[r]:bounds[r + 1]].sum()) / flops[r]
        if j + 1 < len(used):
            t = t + alpha + cut_bytes(sizes, bounds[r + 1], batch, act) * beta
    return t


def split_time(sizes: list[int], cut: int, batch: int, edge_flops: float, server_flops: float, alpha: float,
               beta: float, act: str = "float32") -> float:
    """Two tiers: T(c) = edge_time + alpha + bytes(c) beta + server_time; T(L) = edge_time(L)."""
    return chain_time(sizes, [cut], batch, [edge_flops, server_flops], alpha, beta, act)


def best_cut(sizes: list[int], batch: int, edge_flops: float, server_flops: float, alpha: float, beta: float,
             act: str = "float32") -> tuple[int, np.ndarray]:
    """The cut of least T(c) (the earliest on ties) and T(c) for every c = 0..L."""
    times = np.array([split_time(sizes, c, batch, edge_flops, server_flops, alpha, beta, act)
                      for c in range(len(sizes))])
    return int(np.argmin(times)), times


def best_cuts(sizes: list[int], batch: int, flops: Any, alpha: float, beta: float,
              act: str = "float32") -> tuple[list[int], float]:
    """Exhaustive search over every non-decreasing choice of K-1 cuts (C(L+K-1, K-1) of them)."""
    L = len(sizes) - 1
    best = min(combinations_with_replacement(range(L + 1), len(flops) - 1),
               key=lambda c: chain_time(sizes, c, batch, flops, alpha, beta, act))
    return list(best), chain_time(sizes, best, batch, flops, alpha, beta, act)


# --- the network, float and int8 ---------------------------------------------------------------------

def forward_layers(params: nn.Params, h: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Layers [start, stop) of ``nn.mlp_forward``: h W_i + b_i, ReLU except after the network's last layer."""
    L = len(widths(params)) - 1
    for i in range(start, stop):
        h = nn.linear_forward(params[f"W{i}"], params[f"b{i}"], h)
        h = nn.relu(h) if i < L - 1 else h
    return h


def quantize_per_channel(W: np.ndarray, qmax: int = 127) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output column: s_j = max_i |W_ij| / qmax (1 for a zero column), q = round(W / s).

    qmax = 127 is full int8; 64 is onnxruntime's ``reduce_range`` for int8 ([-64, 64], about 7 bits, Section 5)."""
    if not 1 <= int(qmax) <= 127:
        raise ValueError(f"qmax must be an int8 level in [1, 127], got {qmax!r}")
    amax = np.abs(W).max(axis=0)
    s = np.where(amax > 0, amax / np.asarray(qmax, W.dtype), 1.0).astype(W.dtype)
    return np.clip(np.rint(W / s), -qmax, qmax).astype(np.int8), s


def quantize_activation(h: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """Symmetric int8 per tensor: s = max |h| / 127 (1 for all zeros), q = round(h / s); |h - q s| <= s / 2."""
    amax = float(np.abs(h).max()) if h.size else 0.0
    s = np.float32(amax / Q if amax > 0 else 1.0)
    return np.clip(np.rint(h / s), -Q, Q).astype(np.int8), s


def pack_int8(q: np.ndarray, s: np.float32) -> np.ndarray:
    """One message: the float32 scale's 4 bytes, then the codes (n d + 4 bytes in all)."""
    return np.concatenate([np.frombuffer(np.float32(s).tobytes(), np.uint8), q.reshape(-1).view(np.uint8)])


def unpack_int8(buf: np.ndarray, width: int) -> np.ndarray:
    """Inverse of ``pack_int8`` followed by dequantization: float32 rows of ``width`` numbers."""
    s = buf[:4].view(np.float32)[0]
    return buf[4:].view(np.int8).reshape(-1, width).astype(np.float32) * s


def quantize_mlp(params: nn.Params, qmax: int = 127) -> nn.Params:
    """Every layer's weight as int8 codes ``q{i}`` with per-channel scales ``s{i}``; biases ``b{i}`` stay float."""
    out: nn.Params = {}
    for i in range(len(widths(params)) - 1):
        out[f"q{i}"], out[f"s{i}"] = quantize_per_channel(params[f"W{i}"], qmax)
        out[f"b{i}"] = params[f"b{i}"]
    return out


def int8_forward_layers(qparams: nn.Params, h: np.ndarray, start: int, stop: int, L: int) -> np.ndarray:
    """W8A8 layers [start, stop): quantize h per tensor, integer product, rescale by s_x s_j, add the bias."""
    for i in range(start, stop):
        qh, sh = quantize_activation(h)
        acc = qh.astype(np.float64) @ qparams[f"q{i}"].astype(np.float64)  # exact integer sums (|sum| << 2^53)
        h = (acc * (sh * qparams[f"s{i}"].astype(np.float64))).astype(np.float32) + qparams[f"b{i}"]
        h = nn.relu(h) if i < L - 1 else h
    return h


def _float32(params: nn.Params) -> nn.Params:
    return {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}


def _stage(params: nn.Params, qparams: nn.Params | None, h: np.ndarray, a: int, b: int, L: int) -> np.ndarray:
    return forward_layers(params, h, a, b) if qparams is None else int8_forward_layers(qparams, h, a, b, L)


def _cross(h: np.ndarray, act: str) -> np.ndarray:
    """What the receiver gets: h itself (float32) or its int8 round trip."""
    return h if act == "float32" else unpack_int8(pack_int8(*quantize_activation(h)), h.shape[1])


def reference_split_inference(params: nn.Params, x: np.ndarray, cuts: Any = (), act: str = "float32",
                              int8_edge: bool = False) -> np.ndarray:
    """One machine, the same arithmetic as ``split_inference``: float32 layers, the chosen format at each hop,
    int8 weights and activations on rank 0's layers when ``int8_edge``."""
    p = _float32(params)
    L = len(widths(p)) - 1
    bounds = stage_bounds(cuts, L)
    used = _used(bounds)
    h = np.asarray(x, dtype=np.float32)
    for j, r in enumerate(used):
        h = _stage(p, quantize_mlp(p) if int8_edge and r == 0 else None, h, bounds[r], bounds[r + 1], L)
        if j + 1 < len(used):
            h = _cross(h, _act(act))
    return h


def split_inference(comm: Comm, params: nn.Params, x: np.ndarray | None, cuts: Any, flops: Any,
                    act: str = "float32", int8_edge: bool = False) -> np.ndarray | None:
    """Per rank: receive from the previous used tier (rank 0 starts from ``x``), run this tier's layers,
    charge FLOPs / F_r with ``comm.compute``, send to the next used tier. Returns the output on the last
    used tier, None elsewhere. Every rank derives the chain from ``cuts``, so it knows whom it waits for."""
    p = _float32(params)
    sizes = widths(p)
    L = len(sizes) - 1
    bounds = stage_bounds(cuts, L)
    if len(bounds) - 1 != comm.size or len(flops) != comm.size:
        raise ValueError(f"{comm.size} ranks need {comm.size - 1} cuts and {comm.size} FLOP/s, "
                         f"got cuts={list(cuts)} and {len(flops)} FLOP/s")
    used, r = _used(bounds), comm.rank
    if r not in used:
        return None
    j = used.index(r)
    if j == 0:
        h = np.asarray(x, dtype=np.float32)
    else:
        buf = comm.recv(used[j - 1])
        h = buf if act == "float32" else unpack_int8(buf, sizes[bounds[r]])
    a, b = bounds[r], bounds[r + 1]
    h = _stage(p, quantize_mlp(p) if int8_edge and r == 0 else None, h, a, b, L)
    comm.compute(float(layer_flops(sizes, h.shape[0])[a:b].sum()) / flops[r])
    if j + 1 == len(used):
        return h
    comm.send(h if _act(act) == "float32" else pack_int8(*quantize_activation(h)), used[j + 1])
    return None


def run_split_inference(params: nn.Params, x: np.ndarray, cuts: Any, flops: Any, alpha: float = 1e-3,
                        beta: float = 1e-6, act: str = "float32", int8_edge: bool = False,
                        faults: cluster.Faults | None = None, timeout: float = 60.0
                        ) -> tuple[np.ndarray, cluster.RunResult]:
    """Driver: K = len(cuts) + 1 tiers on the simulator; returns (the output, the run)."""
    res = cluster.run(split_inference, len(cuts) + 1, args=(params, x, list(cuts), list(flops)),
                      kwargs=dict(act=act, int8_edge=int8_edge), network=cluster.Network(alpha=alpha, beta=beta),
                      faults=faults, timeout=timeout)
    return next(v for v in reversed(res.values) if v is not None), res


# --- a trained model, and its production twin -----------------------------------------------------

def fit_mlp(X: np.ndarray, y: np.ndarray, sizes: list[int], epochs: int = 10, lr: float = 1e-3,
            batch_size: int = 64, seed: int = 0) -> nn.Params:
    """Minibatch Adam on softmax cross-entropy, float64; a pure function of ``seed``."""
    params = nn.mlp_init(sizes, seed=seed)
    state, rng = nn.adam_init(params), np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(len(X))
        for lo in range(0, len(X), batch_size):
            rows = order[lo:lo + batch_size]
            logits, cache = nn.mlp_forward(params, X[rows])
            _, grads = nn.mlp_backward(params, cache, nn.softmax_cross_entropy(logits, y[rows])[1])
            nn.adam_step(params, grads, state, lr=lr)
    return params


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == y))


def torch_layers(params: nn.Params, start: int, stop: int) -> Any:
    """Layers [start, stop) as a float32 ``torch.nn.Sequential`` with the same weights (Linear holds W^T)."""
    import torch

    L = len(widths(params)) - 1
    mods: list[Any] = []
    for i in range(start, stop):
        W = np.asarray(params[f"W{i}"], dtype=np.float32)
        lin = torch.nn.Linear(*W.shape)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W.T.copy()))
            lin.bias.copy_(torch.from_numpy(np.asarray(params[f"b{i}"], dtype=np.float32)))
        mods += [lin, torch.nn.ReLU()] if i < L - 1 else [lin]
    return torch.nn.Sequential(*mods).eval()


def export_onnx(params: nn.Params, stop: int, path: str, batch: int = 8) -> str:
    """The edge half (layers [0, stop)) to ONNX with ``torch.onnx.export`` (the dynamo exporter, torch's
    default), one file with the weights inside, a dynamic batch axis; returns ``path``."""
    import logging

    import torch

    if stop < 1:
        raise ValueError(f"the edge half needs at least one layer to export, got stop={stop}")
    # the exporter logs a warning per torchvision operator it cannot register (torchvision is not a course
    # dependency, and these layers use none of them)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    model = torch_layers(params, 0, stop)
    x = torch.zeros(batch, widths(params)[0])
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["h"], external_data=False,
                      dynamic_shapes=({0: torch.export.Dim("batch")},), verbose=False)
    return path
