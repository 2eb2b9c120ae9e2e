"""From-scratch ring all-reduce on the process backend vs torch.distributed (gloo) all_reduce.

Three all-reduces of the same float32 tensor run in the same workers, interleaved, median of repeats:
- ours: ``collectives.ring_allreduce`` over ``comm.send``/``comm.recv`` (returns a new array);
- gloo: ``torch.distributed.all_reduce`` (in place, one fused C++ collective);
- p2p floor: the same ring written directly on torch's isend/irecv, receives posted before the
  matching sends and results written in place: what any ring over gloo point-to-point can reach.
Bus bandwidth = 2(K-1)/K * bytes / t; ratios are of times measured in this one run. Target: ours >= 0.8x gloo.
Usage: python benchmarks/bench_process_allreduce.py [--mib 16] [--K 2] [--repeats 25]
"""
from __future__ import annotations

import argparse

import numpy as np

from _common import machine, report
from scaleoutai import cluster


def p2p_ring(x, out, tmp):  # noqa: ANN001 - torch tensors; the ring of collectives.ring_allreduce
    import torch
    import torch.distributed as dist

    K, r = dist.get_world_size(), dist.get_rank()
    bounds = np.cumsum([0] + [len(b) for b in np.array_split(np.empty(x.numel()), K)])
    blk = [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(K)]
    nxt, prv = (r + 1) % K, (r - 1) % K
    sends = []
    for s in range(K - 1):
        i = (r - s - 2) % K
        recv = dist.irecv(tmp[: blk[i].stop - blk[i].start], prv)
        sends.append(dist.isend((x if s == 0 else out)[blk[(r - s - 1) % K]], nxt))
        recv.wait()
        torch.add(x[blk[i]], tmp[: blk[i].stop - blk[i].start], out=out[blk[i]])
    for s in range(K - 1):
        recv = dist.irecv(out[blk[(r - s - 1) % K]], prv)
        sends.append(dist.isend(out[blk[(r - s) % K]], nxt))
        recv.wait()
    for w in sends:
        w.wait()


def worker(comm, n: int, repeats: int) -> dict:  # noqa: ANN001
    import time

    import torch
    import torch.distributed as dist

    from scaleoutai.collectives import ring_allreduce

    x = np.random.default_rng(comm.rank).standard_normal(n).astype(np.float32)
    tx, out, tmp = torch.from_numpy(x), torch.empty(n), torch.empty(n // comm.size + 1)
    times: dict[str, list[float]] = {"ours": [], "gloo": [], "p2p": []}
    for i in range(repeats + 3):  # three warm-up rounds
        for name in times:
            t_in = torch.from_numpy(x.copy()) if name == "gloo" else None
            comm.barrier()
            t = time.perf_counter()
            if name == "ours":
                y = ring_allreduce(comm, x)
            elif name == "gloo":
                dist.all_reduce(t_in)
            else:
                p2p_ring(tx, out, tmp)
            if i >= 3:
                times[name].append(time.perf_counter() - t)
            if name == "gloo":
                assert np.allclose(y, t_in.numpy(), rtol=1e-5, atol=1e-5)
    assert np.allclose(y, out.numpy(), rtol=1e-5, atol=1e-5)
    return {k: float(np.median(v)) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=25)
    a = ap.parse_args()
    n = int(a.mib * 2**20) // 4
    res = cluster.run(worker, a.K, backend="process", args=(n, a.repeats), timeout=600, quiet=True)
    t = {k: max(v[k] for v in res.values) for k in ("ours", "gloo", "p2p")}  # the slowest rank finishes it
    bus = 2 * (a.K - 1) / a.K * 4 * n
    print(f"machine: {machine()}")
    print(f"K={a.K}, {a.mib:g} MiB float32, median of {a.repeats}, bus bandwidth:")
    for k, label in (("ours", "from-scratch ring (comm)"), ("gloo", "gloo all_reduce"), ("p2p", "ring on torch p2p")):
        print(f"  {label:26s} {t[k] * 1e3:6.1f} ms  {bus / t[k] / 1e9:5.2f} GB/s")
    print(f"  ring on torch p2p / gloo: {t['gloo'] / t['p2p']:.2f}x; ours / ring on torch p2p: {t['p2p'] / t['ours']:.2f}x")
    ratio = t["gloo"] / t["ours"]
    report("bus bandwidth ratio ours/gloo", ratio, "x", ">= 0.8x", ratio >= 0.8)


if __name__ == "__main__":
    main()
