"""Same script, every scale (Appendix B): a from-scratch ring all-reduce checked against torch's.

    python examples/allreduce_check.py                         # a world of one
    scaleout run examples/allreduce_check.py --workers 4       # 4 local processes
    scaleout run examples/allreduce_check.py --scale torchrun --nodes 2 --workers 1
    scaleout run examples/allreduce_check.py --scale slurm --nodes 2 --dry-run
    scaleout run examples/allreduce_check.py --scale ray --workers 2

Ring all-reduce (ch4): reduce-scatter then all-gather over K chunks, 2(K-1) steps; every rank sends
2(K-1)/K of the vector, the bandwidth-optimal amount. Each rank prints one line; any disagreement
with ``torch.distributed.all_reduce`` beyond the tolerance exits with status 1.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys

import numpy as np

from scaleoutai import cluster


def ring_allreduce(comm, x: np.ndarray) -> np.ndarray:
    """Sum of ``x`` over all ranks, using only comm.send/recv to the ring neighbours."""
    k, r = comm.size, comm.rank
    chunks = [c.copy() for c in np.array_split(x, k)]  # uneven when len(x) % k != 0
    right, left = (r + 1) % k, (r - 1) % k
    for step in range(k - 1):  # reduce-scatter: after it, rank r owns the full sum of chunk (r+1) % k
        comm.send(chunks[(r - step) % k], right)
        i = (r - step - 1) % k
        chunks[i] = chunks[i] + comm.recv(left)
    for step in range(k - 1):  # all-gather: pass the finished chunks around the ring
        comm.send(chunks[(r + 1 - step) % k], right)
        chunks[(r - step) % k] = comm.recv(left)
    return np.concatenate(chunks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=10_007, help="vector length (a prime: uneven chunks)")
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64", "int64"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    owner = not dist.is_initialized()  # under Ray Train the group is Ray's to tear down
    comm = cluster.init(timeout=120)
    x = (np.random.default_rng(args.seed + comm.rank).standard_normal(args.length) * 100).astype(args.dtype)
    mine = ring_allreduce(comm, x)
    t = torch.from_numpy(x.copy())
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    theirs = t.cpu().numpy()
    # Sums in a different order differ by rounding only: ~K ulps of the largest partial sum.
    tol = 0 if np.issubdtype(x.dtype, np.integer) else comm.size * np.finfo(x.dtype).eps * np.abs(theirs).max() * 4
    err = float(np.max(np.abs(mine.astype(np.float64) - theirs.astype(np.float64)))) if args.length else 0.0
    ok = err <= tol
    print(f"rank {comm.rank}/{comm.size} on {socket.gethostname()} pid {os.getpid()}: ring allreduce "
          f"{'==' if ok else '!='} torch all_reduce (n={args.length}, {args.dtype}, max err {err:.2e}, "
          f"sent {comm.stats.bytes_sent} B in {comm.stats.messages_sent} msgs) {'OK' if ok else 'MISMATCH'}\n",
          end="", flush=True)  # one write with its newline: ranks sharing an output file never splice lines
    comm.flush()
    dist.barrier()
    if owner:
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
