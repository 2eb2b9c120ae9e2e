"""Distributed stream pipeline: keyed tumbling windows over K partitions, shuffled by key (Chapter 41).

    scaleout run distributed.py --workers 2 -- --n 100000
    scaleout capstone sweep distributed.py --baseline baseline.py --workers 1,2 -- --n 100000

Per micro-batch each rank reads its block, one all-to-all sends every event to its key's owner, the
owner windows it, and one all-reduce of the latest event time moves the watermark on every rank.
The communicator is the course's (``cluster.init()``: torch.distributed, gloo on CPU), as in
Chapter 9. Afterwards rank 0 gathers the emitted rows (outside the timed region) and checks them
against the single-machine run exactly: same rows, same counts, bit-equal sums.
"""
from __future__ import annotations

import argparse
import sys

import problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    problem.add_arguments(parser)
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with the baseline")
    args = parser.parse_args()
    problem.set_threads(args.threads)  # before NumPy and torch load

    import numpy as np

    from scaleoutai import capstone, cluster

    comm = cluster.init()
    events = problem.make_stream(args)  # the replayed source: not timed
    problem.warm_up(events, args)
    with capstone.track(comm, experiment=args.experiment, params=problem.params(args),
                        problem="stream-windows") as run:
        rows, dropped = problem.run_stream(events, args, lambda op, b: problem.partition_step(comm, op, b))
        run.log_items(args.n)
    # the sink: every rank's rows to rank 0 (verification only, outside the timed region)
    mine = problem.rows_array(rows)
    sent = comm.stats.bytes_sent
    if comm.rank:
        comm.send(mine, 0)
        comm.send(np.array([dropped, sent], dtype=np.int64), 0)
        return 0
    parts = [mine] + [comm.recv(src) for src in range(1, comm.size)]
    meta = [np.array([dropped, sent])] + [comm.recv(src) for src in range(1, comm.size)]
    got = problem.rows_array(np.concatenate(parts).tolist())
    total_dropped = int(sum(m[0] for m in meta))
    run.log_metrics({"windows_emitted": len(got), "late_pairs_dropped": total_dropped,
                     "shuffle_bytes_sent": float(sum(m[1] for m in meta))})
    status = 0
    if not args.no_check:
        ref_rows, ref_dropped = problem.run_stream(events, args, problem.single_step)
        ok, detail = problem.compare(got, problem.rows_array(ref_rows))
        ok = ok and total_dropped == ref_dropped
        run.set_tag("scaleout.verified", str(ok).lower())
        print(f"K={comm.size}: {len(got)} rows, {total_dropped} late pairs dropped (baseline {ref_dropped}); "
              f"{detail} ({'matches' if ok else 'DIFFERS from'} the baseline)")
        status = 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
