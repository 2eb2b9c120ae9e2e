"""``cluster.init()``: the communicator inside a launched process (torchrun, srun + torchrun, Ray Train).

The launcher's environment names the group (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
Appendix B). Under Ray Train the process group already exists and is reused. Started with plain
``python script.py``, the script gets a world of one, so the same file runs everywhere.
"""
from __future__ import annotations

import os

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
    if not dist.is_initialized():
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
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo") if not missing else None
        if missing:  # plain `python script.py`: a world of one
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                    timeout=timedelta(seconds=timeout))
        else:
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
    elif dist.get_backend() == "nccl":
        device = f"cuda:{torch.cuda.current_device()}"
    return ProcessComm(dist.get_rank(), dist.get_world_size(), trace=trace, device=device, timeout=timeout)
