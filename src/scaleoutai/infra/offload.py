"""Offloading decisions over a varying link, and a split that survives a lost message (Chapter 34, Sections 4 and 6).

The link's bandwidth follows a Markov chain over a few states (a seeded trace, one state per task): it
stays with probability ``stay`` and otherwise moves to a neighbouring state. Each task (a batch of n rows
through the MLP) is run at the cut c a policy picks, with the two-tier latency of ``edge.split_time`` and
the device's energy

    E(c) = p_compute edge_time(c) + p_radio (alpha + bytes(c) beta) + p_idle server_time(c)

(the radio is on for the transfer; the device idles while the server computes; nothing for c = L but the
compute). Policies: always-local (c = L), always-offload (c = 0), a threshold on the measured bandwidth
(offload everything when the last measurement is above it), adaptive (Neurosurgeon: the best cut for the
last measurement) and the oracle (the best cut for the bandwidth the task will actually see). The device
measures the link once per task (a probe), so every policy but the oracle acts on the previous task's
bandwidth. A task misses its deadline when its latency exceeds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import nn
from ..cluster import Comm, MessageLostError, PeerCrashedError
from . import edge

__all__ = ["POLICIES", "Energy", "task_cost", "choose_cut", "simulate_offloading", "summarize",
           "offload_with_fallback", "fallback_time"]

POLICIES = ("local", "offload", "threshold", "adaptive", "oracle")


@dataclass(frozen=True)
class Energy:
    """Power draw of the edge device (watts) while it computes, transmits and waits."""

    p_compute: float = 2.0
    p_radio: float = 1.0
    p_idle: float = 0.1


def task_cost(sizes: list[int], cut: int, batch: int, bandwidth: float, edge_flops: float, server_flops: float,
              alpha: float, energy: Energy = Energy(), act: str = "float32") -> tuple[float, float]:
    """(latency, device energy) of one task at ``cut``: ``edge.split_time`` and E(c) of the module docstring."""
    L, per_layer = len(sizes) - 1, edge.layer_flops(sizes, batch)
    t_edge = float(per_layer[:cut].sum()) / edge_flops
    if cut == L:
        return t_edge, energy.p_compute * t_edge
    t_link = alpha + edge.cut_bytes(sizes, cut, batch, act) / bandwidth
    t_server = float(per_layer[cut:].sum()) / server_flops
    return t_edge + t_link + t_server, energy.p_compute * t_edge + energy.p_radio * t_link + energy.p_idle * t_server


def choose_cut(policy: str, sizes: list[int], batch: int, measured: float, actual: float, edge_flops: float,
               server_flops: float, alpha: float, threshold: float = 0.0, act: str = "float32") -> int:
    """The cut ``policy`` picks from the last measured bandwidth (the oracle: from the actual one)."""
    L = len(sizes) - 1
    if policy == "local":
        return L
    if policy == "offload":
        return 0
    if policy == "threshold":
        return 0 if measured > threshold else L
    if policy in ("adaptive", "oracle"):
        bw = measured if policy == "adaptive" else actual
        return edge.best_cut(sizes, batch, edge_flops, server_flops, alpha, 1.0 / bw, act)[0]
    raise ValueError(f"policy={policy!r} is not an offloading policy: choose one of {POLICIES}")


def simulate_offloading(policy: str, trace: np.ndarray, sizes: list[int], batch: int, edge_flops: float,
                        server_flops: float, alpha: float, energy: Energy = Energy(), threshold: float = 0.0,
                        act: str = "float32") -> dict[str, np.ndarray]:
    """Run every task of the bandwidth ``trace`` under ``policy``; returns per-task cut, latency and energy.
    The first task has no measurement yet and uses the trace's first value (a probe at start-up)."""
    cuts, lat, en = [], [], []
    for t, bw in enumerate(trace):
        measured = trace[t - 1] if t > 0 else trace[0]
        c = choose_cut(policy, sizes, batch, measured, bw, edge_flops, server_flops, alpha, threshold, act)
        lt, e = task_cost(sizes, c, batch, bw, edge_flops, server_flops, alpha, energy, act)
        cuts.append(c)
        lat.append(lt)
        en.append(e)
    return {"cut": np.array(cuts), "latency": np.array(lat), "energy": np.array(en)}


def summarize(result: dict[str, np.ndarray], deadline: float) -> dict[str, float]:
    """Mean and 95th-percentile latency, mean energy per task, and the deadline-miss rate."""
    lat = result["latency"]
    return {"mean_latency": float(lat.mean()), "p95_latency": float(np.percentile(lat, 95)),
            "energy": float(result["energy"].mean()), "miss_rate": float(np.mean(lat > deadline))}


# --- a split that survives the link ------------------------------------------------------------------

NACK = np.zeros(1, dtype=np.int8)  # the server's "your activation never arrived": 1 byte


def offload_with_fallback(comm: Comm, params: nn.Params, x: np.ndarray | None, cut: int, flops: Any,
                          act: str = "float32") -> np.ndarray | None:
    """Two ranks. The edge (rank 0) runs layers [0, cut) and sends the activation; the server (rank 1) runs
    the rest and sends the logits back. If the activation is lost, the server's receive times out at the
    moment it was due (MessageLostError) and it answers NACK; if the server has crashed, the edge's receive
    raises PeerCrashedError. Either way the edge finishes layers [cut, L) itself, so it always returns the
    network's output. A NACK is one byte and logits are n d_L floats, so the edge tells them apart by size."""
    p = edge._float32(params)
    sizes = edge.widths(p)
    L = len(sizes) - 1
    if comm.size != 2 or not 0 <= cut < L:
        raise ValueError(f"offload_with_fallback runs on 2 ranks with 0 <= cut < {L}, got {comm.size} ranks, cut={cut}")
    if comm.rank == 1:
        try:
            buf = comm.recv(0)
        except MessageLostError:
            comm.send(NACK, 0)
            return None
        h = buf if act == "float32" else edge.unpack_int8(buf, sizes[cut])
        out = edge.forward_layers(p, h, cut, L)
        comm.compute(float(edge.layer_flops(sizes, len(h))[cut:].sum()) / flops[1])
        comm.send(out, 0)
        return None
    h = edge.forward_layers(p, np.asarray(x, dtype=np.float32), 0, cut)
    per_layer = edge.layer_flops(sizes, len(h))
    comm.compute(float(per_layer[:cut].sum()) / flops[0])
    comm.send(h if edge._act(act) == "float32" else edge.pack_int8(*edge.quantize_activation(h)), 1)
    try:
        reply = comm.recv(1)
    except PeerCrashedError:
        reply = NACK
    if reply.size == NACK.size and reply.dtype == NACK.dtype:
        h = edge._cross(h, act)  # what the server would have started from, so the answer does not depend on the path
        out = edge.forward_layers(p, h, cut, L)
        comm.compute(float(per_layer[cut:].sum()) / flops[0])
        return out
    return reply


def fallback_time(sizes: list[int], cut: int, batch: int, flops: Any, alpha: float, beta: float, lost: bool,
                  act: str = "float32") -> float:
    """Latency of ``offload_with_fallback``. Delivered: edge + (alpha + bytes beta) + server + (alpha + 4 n d_L beta).
    Lost: edge + (alpha + bytes beta) [the timeout] + (alpha + beta) [the NACK] + the rest at the edge's speed."""
    per_layer = edge.layer_flops(sizes, batch)
    t = float(per_layer[:cut].sum()) / flops[0]
    t = t + alpha + edge.cut_bytes(sizes, cut, batch, act) * beta
    if lost:
        return t + alpha + NACK.nbytes * beta + float(per_layer[cut:].sum()) / flops[0]
    return t + float(per_layer[cut:].sum()) / flops[1] + alpha + 4 * batch * sizes[-1] * beta
