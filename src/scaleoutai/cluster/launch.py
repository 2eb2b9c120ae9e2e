"""``cluster.init()``: the communicator inside a launched process (torchrun, srun + torchrun, Ray Train).

The launcher's environment names the group (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
Appendix B). Under Ray Train the process group already exists and is reused. Started with plain
``python script.py``, the script gets a world of one, so the same file runs everywhere.
"""
from __future__ import annotations

import os
import sys

from .core import ClusterError
from .process import ProcessComm

_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def init(backend: str | None = None, timeout: float = 300.0, trace: bool = False) -> ProcessComm:
    """Join (or create) the default torch.distributed group and return this rank's communicator.

    backend: "gloo" or "nccl"; default nccl when this process sees a CUDA GPU, else gloo.
    """
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    device = "cpu"
    created = not dist.is_initialized()  # under Ray Train the group is Ray's to create and destroy
    if created:
        missing = [v for v in _LAUNCH_VARS if v not in os.environ]
        if len(missing) not in (0, len(_LAUNCH_VARS)):
            raise ClusterError(f"cluster.init(): the launcher set some but not all of {_LAUNCH_VARS}; "
                               f"missing {missing}. Start the script with torchrun or `scaleout run`.")
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"cluster.init(backend={backend!r}): choose 'gloo' (CPU) or 'nccl' (GPU)")
        if backend == "nccl":
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            device = f"cuda:{local}"
        if missing:  # plain `python script.py`: a world of one, on loopback
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                    timeout=timedelta(seconds=timeout))
        else:
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
    elif dist.get_backend() == "nccl":
        device = f"cuda:{torch.cuda.current_device()}"
    comm = ProcessComm(dist.get_rank(), dist.get_world_size(), trace=trace, device=device, timeout=timeout)
    if created:
        _shutdown_at_exit(comm)
    return comm


_failed = False


def _shutdown_at_exit(comm: ProcessComm) -> None:
    """Leave the group cleanly when the script ends: without it gloo aborts the process at exit
    ("terminate called without an active exception") while sends are pending or peers still read."""
    import atexit

    previous = sys.excepthook

    def mark_failed(*exc_info: object) -> None:
        global _failed
        _failed = True
        previous(*exc_info)

    def shutdown() -> None:
        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            comm.flush()
            if not _failed:
                dist.barrier()  # nobody closes its sockets while a peer still reads from them
            comm.close()
            dist.destroy_process_group()
        except Exception as exc:  # noqa: BLE001 - a peer already gone: nothing left to do
            print(f"cluster.init: leaving the group: {exc}", file=sys.stderr)

    sys.excepthook = mark_failed
    atexit.register(shutdown)
