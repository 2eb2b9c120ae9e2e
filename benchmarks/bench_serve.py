"""Ray Serve tail latency (Chapter 23): p50 and p99 of real HTTP requests at several request rates.

Two replicas of the tiny decoder behind Ray Serve's proxy on 127.0.0.1; an open-loop Poisson client
(scaleoutai.serving.loadgen) sends the same prompts at each rate, and every answer is checked against
our decoder's next token. Ray and Serve start-up are excluded. Rates near the replicas' capacity show
the queueing of Section 1 in the p99 first.
Usage: python benchmarks/bench_serve.py [--rates 20 120] [--requests 400] [--smoke]
"""
from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from _common import machine
from scaleoutai.serving.decoder import decoder_forward, decoder_init
from scaleoutai.serving.loadgen import open_loop, post_json, start_decoder_service

CONFIG = dict(vocab=64, d_model=96, n_heads=4, n_layers=2, d_ff=384, max_len=64, seed=0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", type=float, nargs="+", default=[20.0, 120.0])
    ap.add_argument("--requests", type=int, default=400, help="requests per rate")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="60 requests per rate")
    args = ap.parse_args()
    n = 60 if args.smoke else args.requests
    print(machine())
    import ray
    from ray import serve

    model = decoder_init(**CONFIG)
    prompts = np.random.default_rng(0).integers(0, 64, size=(n, 32))
    expected = [int(np.argmax(decoder_forward(model, p[None])[0, -1])) for p in prompts]
    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        url = start_decoder_service(CONFIG, replicas=args.replicas)
        post_json(url, {"tokens": prompts[0].tolist()})
        print(f"Ray and Serve start-up {time.perf_counter() - t0:.1f} s (excluded)")
        print(f"{'rate (req/s)':>12} {'p50 (ms)':>9} {'p99 (ms)':>9} {'mean (ms)':>10} {'replicas':>9}")
        for rate in args.rates:
            lat, replies = open_loop(url, rate, [{"tokens": p.tolist()} for p in prompts], seed=int(rate))
            if [r["next"] for r in replies] != expected:
                raise SystemExit("a reply differs from our decoder's next token")
            pids = {r["pid"] for r in replies}
            print(f"{rate:>12.0f} {np.percentile(lat, 50) * 1e3:>9.1f} {np.percentile(lat, 99) * 1e3:>9.1f} "
                  f"{lat.mean() * 1e3:>10.1f} {len(pids):>9}")
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
