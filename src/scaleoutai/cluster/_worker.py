"""Entry point of one rank started by ``cluster.run(..., backend="process")``.

Usage: python -m scaleoutai.cluster._worker TMPDIR RANK WORLD_SIZE STORE_PORT
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback
from typing import Any

from .core import Comm


def _die_with_parent() -> None:
    # Linux: SIGKILL this process when the parent dies, so no rank is ever orphaned.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # pragma: no cover - not Linux
        pass


def _write(path: str, obj: dict) -> None:
    import cloudpickle

    part = f"{path}.part"
    with open(part, "wb") as f:
        cloudpickle.dump(obj, f)
    os.replace(part, path)


def _fail(out: str, exc: BaseException) -> None:
    summary = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit):
        summary = f"called sys.exit({exc.code!r}); return a value from the worker instead"
    _write(out, {"ok": False, "time": time.time(), "summary": summary, "traceback": traceback.format_exc()})
    sys.stdout.flush()
    os._exit(1)


def join_group(rank: int, size: int, port: int, timeout: float, host_store: bool = False, **comm_kwargs: Any) -> Any:
    """Join the gloo group of ``size`` local ranks whose store is on 127.0.0.1:``port`` (rank 0 hosts it
    when ``host_store``) and return this rank's ProcessComm, with receiver threads: the process must end
    with ``os._exit`` (see ``process``). Shared by ``cluster.run`` and the grader's forked ranks."""
    from datetime import timedelta

    import torch.distributed as dist

    from scaleoutai.cluster.process import ProcessComm

    td = timedelta(seconds=timeout)
    store = dist.TCPStore("127.0.0.1", port, size, host_store and rank == 0, td, wait_for_workers=False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size, timeout=td)
    return ProcessComm(rank, size, timeout=timeout, progress=True, **comm_kwargs)


def call_rank(fn: Any, comm: Comm, args: tuple = (), kwargs: dict | None = None) -> Any:
    """``fn(comm, *args, **kwargs)``, then wait until this rank's messages are delivered and every rank
    is done: nobody closes its sockets while a peer still reads from them."""
    import torch.distributed as dist

    value = fn(comm, *args, **(kwargs or {}))
    comm.flush()
    dist.barrier()
    return value


def _start(tmp: str, rank: int, size: int, port: int) -> tuple[dict, object]:
    """Load the job and join the group; any failure here is reported like a failure in fn."""
    import json

    import cloudpickle

    with open(os.path.join(tmp, "sys_path.json")) as f:  # before unpickling: fn's module may live there
        for p in reversed(json.load(f)):
            if p not in sys.path:
                sys.path.insert(0, p)
    with open(os.path.join(tmp, "job.pkl"), "rb") as f:
        job = cloudpickle.load(f)
    return job, join_group(rank, size, port, job["timeout"], trace=job["trace"], faults=job["faults"])


def main(argv: list[str]) -> int:
    _die_with_parent()
    tmp, rank, size, port = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    out = os.path.join(tmp, f"rank{rank}.pkl")
    try:
        job, comm = _start(tmp, rank, size, port)
    except BaseException as exc:  # noqa: BLE001
        _fail(out, exc)
    from scaleoutai.cluster.process import CRASH_EXIT_CODE, InjectedCrash

    try:
        value = call_rank(job["fn"], comm, job["args"], job["kwargs"])
    except InjectedCrash:
        sys.stdout.flush()
        _write(out, {"ok": False, "time": time.time(), "summary": "crashed", "traceback": ""})
        os._exit(CRASH_EXIT_CODE)
    except BaseException as exc:  # noqa: BLE001 - report every failure, SystemExit included
        _fail(out, exc)
    comm.stats.wall_time = time.perf_counter() - comm._t0
    try:
        _write(out, {"ok": True, "time": time.time(), "value": value, "stats": comm.stats.as_dict(),
                     "trace": comm.trace or []})
    except Exception as exc:  # noqa: BLE001 - e.g. a return value that cannot be pickled
        _fail(out, TypeError(f"the worker's return value could not be sent back: {exc}"))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: the group is done and the parent has what it needs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
