"""The fleet (Chapter 23): routing policies, prefill/decode disaggregation and an autoscaler, modelled.

1. A multi-turn chat workload with shared system prompts (``fleet_workload.prefix_workload``, seeded) served by
   `--replicas` continuous-batching replicas of Llama-3-8B on H100s (``StepCost.for_open_model``, Part V's
   one iteration-cost model: the roofline of ``perf.hardware``, matmuls at mfu 0.5) under round robin,
   least loaded and cache-aware routing; printed per policy: prefix hit rate, TTFT and TPOT p50/p99,
   throughput and the requests each replica got.
2. The same GPUs colocated or split into prefill and decode pools, 2048-token prompts, the KV cache on
   links from 1 to 100 GB/s (``cluster.Network``).
3. An autoscaler sizing FIFO replicas to a p99 SLO over a diurnal day, against static provisioning at
   its peak, priced per GPU-hour from capstone/prices.yaml.
Everything is modelled time; the wall-clock column is how long the simulation took on this machine.
Usage: python benchmarks/bench_fleet_router.py [--requests 3000] [--rate 80] [--replicas 4] [--smoke]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine
from scaleoutai import capstone, datasets
from scaleoutai.cluster import Network
from scaleoutai.serving import autoscale as au
from scaleoutai.serving import disaggregation as dg
from scaleoutai.serving import fleet_workload as fw
from scaleoutai.serving import router as rt
from scaleoutai.serving.step_cost import StepCost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=80.0, help="requests per second")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--cache-blocks", type=int, default=2000, help="prefix-cache blocks of 16 tokens per replica")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="a few hundred requests: checks the script runs")
    a = ap.parse_args()
    day, disagg_n = 86400.0, 1500
    if a.smoke:
        a.requests, day, disagg_n = 300, 4 * 3600.0, 200
    step = StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)
    print(f"# fleet: {machine()}")
    reqs = rt.prepare(fw.prefix_workload(a.requests, a.rate, n_system=16, think=10.0, seed=a.seed), 16)
    print(f"# 1. routing: {a.requests} chat requests at {a.rate}/s (16 system prompts, mean "
          f"{np.mean([len(r.prompt) for r in reqs]):.0f} prompt and {np.mean([r.max_new for r in reqs]):.0f} output "
          f"tokens), {a.replicas} replicas of Llama-3-8B on H100 SXM, {a.cache_blocks * 16} cached tokens each")
    print(f"{'policy':>13s} {'hit rate':>8s} {'TTFT p50':>9s} {'TTFT p99':>9s} {'TPOT p50':>9s} {'TPOT p99':>9s} "
          f"{'tok/s':>7s} {'req/replica':>12s} {'wall s':>6s}")
    for pol in rt.POLICIES:
        t0 = time.perf_counter()
        res = rt.simulate_fleet(reqs, a.replicas, pol, step, cache_blocks=a.cache_blocks)
        s, per = res.summary(), np.bincount(res.replica, minlength=a.replicas)
        print(f"{pol:>13s} {s['hit_rate']:8.1%} {s['ttft_p50'] * 1e3:6.1f} ms {s['ttft_p99'] * 1e3:6.1f} ms "
              f"{s['tpot_p50'] * 1e3:6.2f} ms {s['tpot_p99'] * 1e3:6.2f} ms {s['throughput']:7.0f} "
              f"{per.min():>5d}-{per.max():<6d} {time.perf_counter() - t0:6.1f}")

    work = dg.uniform_workload(disagg_n, 12.0, 2048, 100, seed=a.seed)
    need = dg.min_link_bandwidth(work, step)
    col = dg.simulate_colocated(work, 4, step)
    print(f"# 2. disaggregation: {disagg_n} requests at 12/s, 2048-token prompts, 100 output tokens, 4 GPUs; "
          f"the prefill pool emits {need / 1e9:.2f} GB/s of KV cache (128 KiB per token)")
    print(f"{'setup':>22s} {'link GB/s':>9s} {'TTFT p99':>9s} {'TPOT p99':>9s} {'transfer p99':>12s}")
    print(f"{'colocated 4':>22s} {'-':>9s} {np.percentile(col.ttft(), 99) * 1e3:6.1f} ms "
          f"{np.percentile(col.tpot(), 99) * 1e3:6.2f} ms {'-':>12s}")
    for n_pre in (1, 2):
        for gbps in (1, 5, 25, 100):
            res, tr = dg.simulate_disaggregated(work, n_pre, 4 - n_pre, step, Network(alpha=1e-5, beta=1 / (gbps * 1e9)))
            print(f"{f'{n_pre} prefill + {4 - n_pre} decode':>22s} {gbps:9d} {np.percentile(res.ttft(), 99) * 1e3:6.1f} ms "
                  f"{np.percentile(res.tpot(), 99) * 1e3:6.2f} ms {np.percentile(tr, 99) * 1e3:9.1f} ms")

    price = capstone.lookup("aws-p5.48xlarge")
    per_gpu = price.price_per_hour / price.gpus
    mu, slo = 1.0, 8.0
    arr = au.diurnal_arrivals(day, 2.0, amplitude=0.7, period=day, seed=a.seed)
    svc = datasets.service_times(len(arr), 1.0 / mu, seed=a.seed + 1)
    t0 = time.perf_counter()
    auto = au.autoscale(arr, svc, mu, slo, day, interval=300, window=300, headroom=0.25, cold_start=120)
    peak = int(auto.schedule[:, 1].max())
    fixed = au.static(arr, svc, peak, day)
    print(f"# 3. autoscaling: {len(arr)} requests over {day / 3600:.0f} h (mean 2/s, +-70%), 1 s mean service, "
          f"p99 SLO {slo:.0f} s; {price.instance_type} at {per_gpu:.2f} USD per GPU-hour ({price.date})")
    for name, r in (("autoscaled", auto), (f"static at peak ({peak})", fixed)):
        print(f"{name:>22s}: p99 {r.p99():5.2f} s, {r.gpu_seconds / 3600:7.1f} GPU-hours, "
              f"{r.cost(per_gpu):8.2f} USD")
    print(f"# autoscaled/static cost {auto.gpu_seconds / fixed.gpu_seconds:.2f}; simulation {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
