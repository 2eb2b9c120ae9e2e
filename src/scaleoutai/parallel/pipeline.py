"""Chapter 16: pipeline parallelism (GPipe, 1F1B) and activation checkpointing for the ``model`` MLP.

An L-layer MLP is cut into p stages of consecutive layers (``np.array_split``), one rank per stage. A batch
of B rows is cut into m micro-batches; stage s receives activations from s-1 and gradients from s+1 with
real ``comm.send`` / ``comm.recv``, and accounts its work with ``comm.compute(t_fwd)`` / ``comm.compute(t_bwd)``
per micro-batch, so the simulated makespan shows the bubble. With equal stage times and free links,

    makespan = (m + p - 1)(t_fwd + t_bwd),   bubble = idle / (p * makespan) = (p - 1) / (m + p - 1)

for both schedules. GPipe runs all m forwards, then all m backwards: every stage stashes m micro-batches
of activations. 1F1B runs p-s-1 warm-up forwards on stage s, then alternates one forward and one
backward, then cools down: at most p - s stashed micro-batches. Micro-batch losses are weighted
n_i / B, so the summed gradient equals the single-device gradient of the full-batch mean loss.

Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): the layers are cut into p v chunks and stage s
holds chunks s, s + p, ..., s + (v-1) p, each taking t / v. A micro-batch crosses the ring of stages v
times, so the bubble shrinks by v at the price of v times the point-to-point messages:

    makespan = (m + (p - 1) / v)(t_fwd + t_bwd),   bubble = ((p - 1) / v) / (m + (p - 1) / v)

(needs m a multiple of p and p >= 3, as Megatron-LM does). ``bubble`` here is idle over total time,
(p-1)/(m+p-1); the papers' "bubble time fraction" (p-1)/m divides by the ideal time instead.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import cluster
from ..nn import Params, _n_layers, linear_backward, linear_forward, mse_loss, relu, relu_backward
from ..cluster import Comm

__all__ = ["split_layers", "layers_forward", "layers_backward", "gpipe_schedule", "one_f_one_b_schedule",
           "interleaved_schedule", "SCHEDULES", "bubble_fraction", "OpEvent", "PipelineResult", "pipeline_step", "plot_schedule",
           "checkpointed_mlp_forward", "checkpointed_mlp_backward"]


def split_layers(n_layers: int, p: int) -> list[range]:
    """Consecutive layer ranges of the p stages (sizes differ by at most one)."""
    if not 1 <= p <= n_layers:
        raise ValueError(f"p={p} stages need 1 <= p <= number of layers ({n_layers}): lower p or add layers")
    return [range(int(b[0]), int(b[-1]) + 1) for b in np.array_split(np.arange(n_layers), p)]


def layers_forward(params: Params, layers: range, x: np.ndarray) -> tuple[np.ndarray, list]:
    """Layers ``layers`` of ``model.mlp_forward`` (ReLU after every layer but the network's last)."""
    n, h, cache = _n_layers(params), x, []
    for i in layers:
        z = linear_forward(params[f"W{i}"], params[f"b{i}"], h)
        cache.append((h, z))
        h = relu(z) if i < n - 1 else z
    return h, cache


def layers_backward(params: Params, layers: range, cache: list, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """Backward of ``layers_forward``: (dx, grads of W_i, b_i for i in layers)."""
    n, d, grads = _n_layers(params), dy, {}
    for i, (h, z) in zip(reversed(layers), reversed(cache)):
        if i < n - 1:
            d = relu_backward(z, d)
        d, grads[f"W{i}"], grads[f"b{i}"] = linear_backward(params[f"W{i}"], h, d)
    return d, grads


# --- schedules -----------------------------------------------------------------------------------

def gpipe_schedule(p: int, m: int, stage: int) -> list[tuple[str, int]]:
    """All forwards F0..F(m-1), then all backwards B0..B(m-1)."""
    return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]


def one_f_one_b_schedule(p: int, m: int, stage: int) -> list[tuple[str, int]]:
    """min(p-s-1, m) warm-up forwards, then (F, B) pairs, then the remaining backwards (PipeDream-Flush)."""
    warm = min(p - stage - 1, m)
    ops = [("F", i) for i in range(warm)]
    for j in range(m - warm):
        ops += [("F", warm + j), ("B", j)]
    return ops + [("B", i) for i in range(m - warm, m)]


def interleaved_schedule(p: int, m: int, stage: int, v: int = 2) -> list[tuple[str, int, int]]:
    """(kind, micro-batch, local chunk j) ops of stage ``stage`` holding chunks j p + stage, j < v.

    Forwards run in groups of p micro-batches, chunk by chunk (Megatron-LM's order); backwards the same
    with the chunks reversed. Warm-up: 2 (p - s - 1) + (v - 1) p forwards, then 1F1B, then cool-down.
    """
    if m % p:
        raise ValueError(f"the interleaved schedule needs m ({m}) to be a multiple of p ({p})")
    total = m * v

    def op(kind: str, k: int) -> tuple[str, int, int]:
        j = (k // p) % v
        return kind, (k // (p * v)) * p + k % p, j if kind == "F" else v - 1 - j

    warm = total if m == p else min(2 * (p - stage - 1) + (v - 1) * p, total)
    ops = [op("F", k) for k in range(warm)]
    for i in range(total - warm):
        ops += [op("F", warm + i), op("B", i)]
    return ops + [op("B", k) for k in range(total - warm, total)]


SCHEDULES = {"gpipe": gpipe_schedule, "1f1b": one_f_one_b_schedule, "interleaved": interleaved_schedule}


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Idle share of a synchronous pipeline with equal stages: ((p - 1)/v) / (m + (p - 1)/v); v = 1 for
    GPipe and 1F1B, v chunks per stage for interleaved 1F1B."""
    return ((p - 1) / v) / (m + (p - 1) / v)


@dataclass(frozen=True)
class OpEvent:
    """One forward ("F") or backward ("B") of micro-batch ``mb`` on ``stage``, in simulated (or wall) seconds."""

    stage: int
    kind: str
    mb: int
    start: float
    end: float
    chunk: int = 0  # the stage's local model chunk (interleaved schedule); 0 otherwise


@dataclass
class PipelineResult:
    """One pipeline step: summed gradients (all stages), full-batch loss, the op timeline and stash peaks."""

    schedule: str
    p: int
    m: int
    grads: Params
    loss: float
    events: list[OpEvent]
    peak_stash: list[int]
    backend: str
    run: Any = field(default=None, repr=False)
    v: int = 1

    @property
    def messages(self) -> int:
        """Point-to-point messages the step sent (activations forward, gradients backward)."""
        return sum(st.messages_sent for st in self.run.stats) if self.run is not None else 0

    @property
    def makespan(self) -> float:
        return max(e.end for e in self.events) - min(e.start for e in self.events)

    @property
    def bubble(self) -> float:
        """Measured idle fraction: 1 - sum of op times / (p * makespan)."""
        busy = sum(e.end - e.start for e in self.events)
        return 1.0 - busy / (self.p * self.makespan)


def _stage_worker(comm: Comm, params: Params, x: np.ndarray, t: np.ndarray, m: int, schedule: str,
                  t_fwd: float, t_bwd: float, v: int = 1) -> dict[str, Any]:
    p, s = comm.size, comm.rank
    chunks = split_layers(_n_layers(params), p * v)
    last = p * v - 1
    xs, ts = np.array_split(x, m), np.array_split(t, m)
    B = len(x)
    t0 = time.perf_counter()
    ops = interleaved_schedule(p, m, s, v) if schedule == "interleaved" else \
        [(kind, i, 0) for kind, i in SCHEDULES[schedule](p, m, s)]

    def now() -> float:
        return comm.clock if hasattr(comm, "clock") else time.perf_counter() - t0

    stash: dict[tuple[int, int], Any] = {}
    peak, events, loss = 0, [], 0.0
    grads: Params = {}
    for kind, i, j in ops:
        c = j * p + s  # the global chunk: its neighbours live on stages s - 1 and s + 1 (mod p)
        if kind == "F":
            h = xs[i] if c == 0 else comm.recv((s - 1) % p)
            start = now()
            out, cache = layers_forward(params, chunks[c], h)
            comm.compute(t_fwd / v)
            if c == last:
                li, dy = mse_loss(out, ts[i])
                w = len(xs[i]) / B  # micro-batch mean -> full-batch mean
                loss += w * li
                stash[i, j] = (cache, dy * w)
            else:
                stash[i, j] = (cache, None)
            peak = max(peak, len(stash))
            events.append(OpEvent(s, "F", i, start, now(), j))
            if c < last:
                comm.send(out, (s + 1) % p)
        else:
            cache, dy = stash.pop((i, j))
            if c < last:
                dy = comm.recv((s + 1) % p)
            start = now()
            dx, g = layers_backward(params, chunks[c], cache, dy)
            for key, val in g.items():
                grads[key] = grads[key] + val if key in grads else val
            comm.compute(t_bwd / v)
            events.append(OpEvent(s, "B", i, start, now(), j))
            if c > 0:
                comm.send(dx, (s - 1) % p)
    return {"grads": grads, "loss": loss, "events": events, "peak": peak}


def pipeline_step(params: Params, x: np.ndarray, t: np.ndarray, p: int, m: int, schedule: str = "1f1b",
                  t_fwd: float = 1.0, t_bwd: float = 2.0, backend: str = "sim",
                  network: cluster.Network | None = None, timeout: float = 60.0, trace: bool = False,
                  quiet: bool = True, v: int = 1) -> PipelineResult:
    """Forward and backward of the MSE loss of ``mlp(params, x)`` vs ``t`` on p stage ranks, m micro-batches.

    The simulator's links are free (Network(0, 0)) unless ``network`` is given, so the measured bubble
    isolates the schedule. Returns gradients equal to ``mlp_backward`` of the full batch. ``v`` is the
    number of model chunks per stage of the "interleaved" schedule (1 for the others).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is unknown: choose one of {sorted(SCHEDULES)}")
    if not 1 <= m <= len(x):
        raise ValueError(f"m={m} micro-batches need 1 <= m <= batch size ({len(x)})")
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"v={v} model chunks per stage needs schedule='interleaved'")
    if schedule == "interleaved":
        if not (isinstance(v, int) and v >= 1):
            raise ValueError(f"v must be a whole number of model chunks per stage >= 1, got {v!r}")
        if v > 1 and p < 3:
            raise ValueError(f"the interleaved schedule needs p >= 3 stages (got {p}): with 2 the forward and "
                             f"backward messages share a link in both directions (Megatron-LM has the same rule)")
        if m % p:
            raise ValueError(f"the interleaved schedule needs m ({m}) to be a multiple of p ({p})")
    split_layers(_n_layers(params), p * v)  # validate p (and v) before starting ranks
    if backend == "sim" and network is None:
        network = cluster.Network(0.0, 0.0)
    res = cluster.run(_stage_worker, p, backend=backend, args=(params, x, t, m, schedule, t_fwd, t_bwd, v),
                      network=network, timeout=timeout, trace=trace, quiet=quiet)
    grads: Params = {}
    for val in res.values:
        grads.update(val["grads"])
    events = sorted((e for val in res.values for e in val["events"]), key=lambda e: (e.start, e.stage))
    loss = sum(val["loss"] for val in res.values)  # only the stage holding the last chunk has a loss
    return PipelineResult(schedule, p, m, grads, loss, events, [val["peak"] for val in res.values], res.backend,
                          res, v)


def plot_schedule(result: PipelineResult, ax: Any = None, title: str | None = None) -> Any:
    """Gantt chart: one lane per stage, a blue box per forward and an orange box per backward, labelled by micro-batch."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.55 * result.p + 1.5))
    colors = {"F": "tab:blue", "B": "tab:orange"}
    for e in result.events:
        ax.barh(e.stage, e.end - e.start, left=e.start, height=0.8, color=colors[e.kind], edgecolor="black",
                lw=0.5)
        label = f"{e.kind}{e.mb}" + (f".{e.chunk}" if result.v > 1 else "")
        ax.text((e.start + e.end) / 2, e.stage, label, ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks(range(result.p), [f"stage {s}" for s in range(result.p)])
    ax.invert_yaxis()
    ax.set_xlabel("time (simulated s)" if result.backend == "sim" else "time (wall s)")
    ax.set_title(title or f"{result.schedule}: p={result.p}, m={result.m}, bubble {result.bubble:.3f} "
                          f"(formula {bubble_fraction(result.p, result.m, result.v):.3f})")
    return ax


# --- activation checkpointing ----------------------------------------------------------------------

def _flops(params: Params, layers: range, rows: int) -> int:
    return sum(2 * rows * params[f"W{i}"].size for i in layers)


def _cache_elems(cache: list) -> int:
    return sum(h.size + z.size for h, z in cache)


def checkpointed_mlp_forward(params: Params, x: np.ndarray, k: int) -> tuple[np.ndarray, dict[str, Any]]:
    """Forward that keeps only the input of every k-th layer (segments of k layers) plus the last segment's cache.

    Plain backprop holds (h_i, z_i) for all L layers; this holds ceil(L/k) - 1 segment inputs and one
    segment's cache at a time, at the price of recomputing every segment but the last (k ~ sqrt(L)).
    """
    n = _n_layers(params)
    if not 1 <= k:
        raise ValueError(f"checkpoint interval k must be >= 1, got {k}")
    segments = [range(lo, min(lo + k, n)) for lo in range(0, n, k)]
    h, checkpoints = x, []
    for seg in segments[:-1]:
        checkpoints.append(h)
        h, _ = layers_forward(params, seg, h)  # the segment's cache is dropped here
    y, last = layers_forward(params, segments[-1], h)
    return y, {"segments": segments, "checkpoints": checkpoints, "last": last, "rows": int(np.prod(x.shape[:-1]))}


def checkpointed_mlp_backward(params: Params, cache: dict[str, Any], dy: np.ndarray
                              ) -> tuple[np.ndarray, Params, dict[str, int]]:
    """Backward with recomputation; returns (dx, grads, stats) with grads equal to ``mlp_backward``.

    stats: peak_activation_elements (checkpoints alive + one segment cache), plain_activation_elements
    (what ``mlp_forward`` keeps), forward_flops and recompute_flops (2 * rows * d_in * d_out per layer).
    """
    segs, cps = cache["segments"], list(cache["checkpoints"])
    rows = cache["rows"]
    live = sum(c.size for c in cps)
    peak = live + _cache_elems(cache["last"])
    d, grads = layers_backward(params, segs[-1], cache["last"], dy)
    recompute = 0
    plain = _cache_elems(cache["last"])
    for seg in reversed(segs[:-1]):
        h = cps.pop()
        _, seg_cache = layers_forward(params, seg, h)
        recompute += _flops(params, seg, rows)
        peak = max(peak, live + _cache_elems(seg_cache) - h.size)  # h is both checkpoint and cache[0][0]
        plain += _cache_elems(seg_cache)
        live -= h.size
        d, g = layers_backward(params, seg, seg_cache, d)
        grads.update(g)
    stats = {"peak_activation_elements": peak, "plain_activation_elements": plain,
             "forward_flops": _flops(params, range(_n_layers(params)), rows), "recompute_flops": recompute}
    return d, grads, stats
