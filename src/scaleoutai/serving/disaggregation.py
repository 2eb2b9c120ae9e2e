"""Prefill/decode disaggregation against colocated serving at the same number of GPUs
(Chapter 23, Sections 3 and 7; DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024).

Colocated: G replicas each prefill and decode (``router.Replica``, continuous batching), so an
iteration that prefills a long prompt stalls every sequence decoding beside it: the time per output
token (TPOT) of running requests jumps whenever a prompt arrives. Disaggregated: ``n_prefill``
replicas only prefill (a request leaves after its first token), ``n_decode`` replicas only decode; in
between the prompt's KV cache crosses the network,

    bytes = 2 * layers * n_kv_heads * head_dim * bytes per element * prompt tokens,
    time  = alpha + bytes * beta                      (``cluster.Network.message_time``),

on single-port links: a prefill replica sends one cache at a time and a decode replica receives one at
a time, so transfers queue when the link is slow. The link keeps up only if its bandwidth exceeds the
prefill pool's KV output, (prompt tokens prefilled per second) * bytes per token; below that the queue
grows without bound and the transfer, not the GPUs, sets the latency (``min_link_bandwidth``).

TTFT ends at the prefill replica's first token; TPOT = (last token - first token) / (tokens - 1)
includes the transfer and the wait for a decode slot.
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Network
from .router import FleetRequest, FleetResult, Replica, Router, drive, simulate_fleet
from .step_cost import StepCost


def kv_transfer_bytes(prompt_tokens: int, n_layers: int, n_kv_heads: int, head_dim: int, itemsize: int = 2) -> int:
    """2 * layers * n_kv_heads * head_dim * itemsize * prompt_tokens: K and V of every prompt token."""
    from .efficiency import kv_bytes_per_token

    return kv_bytes_per_token(n_layers, n_kv_heads, head_dim, itemsize) * int(prompt_tokens)


def simulate_disaggregated(requests: list[FleetRequest], n_prefill: int, n_decode: int, step: StepCost,
                           network: Network, max_batch: int = 64, kv_tokens: int = 10**9,
                           prefill_budget: int = 8192) -> tuple[FleetResult, np.ndarray]:
    """Serve on n_prefill prefill replicas and n_decode decode replicas (least-loaded routing in each
    pool); returns the result and each request's KV transfer time on the link (queueing included)."""
    if n_prefill < 1 or n_decode < 1:
        raise ValueError(f"need at least one prefill and one decode replica, got {n_prefill} and {n_decode}")
    n = len(requests)
    pre = [Replica(step, max_batch, kv_tokens, prefill_budget) for _ in range(n_prefill)]
    where_p = drive(requests, pre, Router(n_prefill, "least_loaded"), mode="prefill")
    first = np.array([pre[where_p[i]].first[r.id] for i, r in enumerate(requests)])
    # transfers in the order the caches become ready, each on its sender's egress and its receiver's ingress
    egress, ingress = np.zeros(n_prefill), np.zeros(n_decode)
    dec = [Replica(step, max_batch, kv_tokens, prefill_budget) for _ in range(n_decode)]
    router = Router(n_decode, "least_loaded")
    ready, where_d = np.full(n, np.nan), np.full(n, -1)
    order = np.argsort(first, kind="stable")
    seen = [0] * n_decode
    by_id = {r.id: r for r in requests}
    for i in order:
        req, t = requests[i], float(first[i])
        if req.max_new == 1:
            continue  # the prefill replica's token is the whole answer
        for j, rep in enumerate(dec):  # the decode pool's state at time t, for the router
            rep.advance(t)
            while seen[j] < len(rep.done_log) and rep.done_log[seen[j]][0] <= t:
                router.finished(j, by_id[rep.done_log[seen[j]][1]])
                seen[j] += 1
        d = router.pick(req)
        start = max(t, egress[where_p[i]], ingress[d])
        end = start + network.message_time(len(req.prompt) * step.kv_bytes_per_token)
        egress[where_p[i]] = ingress[d] = end
        ready[i], where_d[i] = end, d
        dec[d].submit(req, "decode", at=end)
    for rep in dec:
        rep.advance(math.inf)
    res = FleetResult(np.empty(n, dtype=np.int64), np.empty(n), np.empty(n), np.empty(n),
                      np.zeros(n, dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64),
                      np.array([r.busy for r in pre + dec]))
    for i, r in enumerate(requests):
        res.replica[r.id], res.arrival[r.id], res.first[r.id] = where_p[i], r.arrival, first[i]
        res.finish[r.id] = first[i] if r.max_new == 1 else dec[where_d[i]].finish[r.id]
        res.prompt_tokens[r.id], res.output_tokens[r.id] = len(r.prompt), r.max_new
    return res, np.where(np.isnan(ready), 0.0, ready - first)


def simulate_colocated(requests: list[FleetRequest], gpus: int, step: StepCost, max_batch: int = 64,
                       kv_tokens: int = 10**9, prefill_budget: int = 8192) -> FleetResult:
    """The same requests on ``gpus`` replicas that both prefill and decode, least-loaded routing, no prefix cache."""
    return simulate_fleet(requests, gpus, "least_loaded", step, max_batch, kv_tokens, prefill_budget, cache_blocks=0)


def min_link_bandwidth(requests: list[FleetRequest], step: StepCost, duration: float | None = None) -> float:
    """Bytes per second the prefill pool emits as KV cache: sum(prompt tokens) * bytes per token / duration
    (default: the arrival span). A link slower than this, per prefill replica summed, cannot keep up."""
    span = duration or (max(r.arrival for r in requests) - min(r.arrival for r in requests))
    return sum(len(r.prompt) for r in requests) * step.kv_bytes_per_token / span


def uniform_workload(n: int, rate: float, prompt_len: int, output_len: int, vocab: int = 32000,
                     seed: int = 0) -> list[FleetRequest]:
    """n requests with Poisson arrivals, every prompt ``prompt_len`` fresh tokens and ``output_len`` answer tokens."""
    from ..datasets import poisson_arrivals

    rng = np.random.default_rng(seed)
    arr = poisson_arrivals(n, rate, seed=seed)
    return [FleetRequest(i, float(arr[i]), rng.integers(0, vocab, size=prompt_len),
                         rng.integers(0, vocab, size=output_len)) for i in range(n)]
