"""Paged vs contiguous KV memory waste and continuous vs static batching throughput (Chapter 24).

One trace of requests (Poisson arrivals, uniform prompt and output lengths, from a seed) is served by
the NumPy decoder with a paged KV cache, once with continuous (iteration-level) batching and once with
static batching, on the same block pool. Reported: the share of reserved KV slots that hold no token
(paged: blocks in use x B; contiguous: max_len per running request), output tokens per iteration,
throughput and p99 latency in modelled seconds (``llm.iteration_seconds``: a 7B model on one GPU), and
the wall-clock tokens/s of the NumPy decoder on this machine. Every request's tokens are checked equal
between the two policies (and, with --check, to per-request greedy decoding).
Usage: python benchmarks/bench_llm_serving.py [--requests 400] [--rate 0.6] [--block-size 16] [--smoke]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine
from scaleoutai import datasets
from scaleoutai.serving import llm
from scaleoutai.serving.decoder import decoder_init


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rate", type=float, default=0.6, help="arrivals per iteration")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--blocks", type=int, default=160)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--check", action="store_true", help="also compare with per-request greedy decoding")
    ap.add_argument("--smoke", action="store_true", help="40 requests: checks the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.requests, a.check = 40, True
    params = decoder_init(vocab=256, d_model=64, n_heads=4, n_layers=2, d_ff=256, max_len=256, seed=0)
    trace = datasets.request_trace(a.requests, a.rate, (8, 64), (8, 128), vocab=256, seed=1)
    print(f"# LLM serving: {a.requests} requests at {a.rate}/iteration, prompts 8-64, outputs 8-128 tokens, "
          f"{a.blocks} blocks of {a.block_size}, max batch {a.max_batch}; {machine()}")
    print(f"{'policy':>10s} {'iters':>6s} {'tok/iter':>8s} {'tok/s model':>11s} {'p99 s model':>11s} "
          f"{'waste paged':>11s} {'waste contig':>12s} {'preempt':>7s} {'CPU tok/s':>9s}")
    outs = {}
    for pol in ("continuous", "static"):
        t0 = time.perf_counter()
        res = llm.serve(params, trace, a.blocks, a.block_size, max_batch=a.max_batch, policy=pol,
                        timer=time.perf_counter)
        wall = time.perf_counter() - t0
        outs[pol] = res.outputs
        paged, contiguous = res.waste()
        tok_s = sum(res.generated) / res.clock_seconds()[-1]
        print(f"{pol:>10s} {res.iterations:6d} {np.mean(res.generated):8.2f} {tok_s:11.0f} "
              f"{np.percentile(res.latency_seconds(), 99):11.2f} {paged:11.1%} {contiguous:12.1%} "
              f"{res.preemptions:7d} {sum(res.generated) / wall:9.0f}")
    assert outs["continuous"] == outs["static"], "the two policies gave different tokens"
    if a.check:
        some = trace[:8]  # the uncached reference is quadratic in length: a sample of requests
        ref = llm.reference_outputs(params, some)
        assert all(outs["continuous"][r.id] == ref[r.id] for r in some), "tokens differ from greedy decoding"
        print(f"# the tokens of {len(some)} requests equal per-request greedy decoding")


if __name__ == "__main__":
    main()
