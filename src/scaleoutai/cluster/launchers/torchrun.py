"""Scale "torchrun": the script under PyTorch's elastic launcher, c10d rendezvous (Appendix B).

One torchrun agent per node starts ``nproc_per_node`` ranks. On this machine ``nodes`` agents run side
by side on loopback, which is exactly what N machines do, minus the wire: each agent joins the c10d
rendezvous at ``127.0.0.1:<free port>`` (hosted by the first agent to arrive) and gets its node rank
from it, so no --node-rank is needed. ``max_restarts`` > 0 lets the agents restart the whole group
after a rank fails (elastic training; the script must resume from its own checkpoint).
Mind the script's option names: torchrun's parser rejects one that is a prefix of its own (``--n``
could be --nnodes or --nproc-per-node), so examples use whole words (``--length``).
"""
from __future__ import annotations

import sys
from typing import Mapping, Sequence

from .local import free_port, run_group


def torchrun_command(script: str, nodes: int, nproc_per_node: int, endpoint: str, script_args: Sequence[str],
                     max_restarts: int = 0, run_id: str = "scaleout", python: str = sys.executable) -> list[str]:
    """The command line of one agent: ``python -m torch.distributed.run ... SCRIPT ARGS``."""
    return [python, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--nproc-per-node={nproc_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={run_id}",
            f"--max-restarts={max_restarts}", script, *script_args]


def run_torchrun(script: str, nodes: int, nproc_per_node: int, script_args: Sequence[str],
                 env: Mapping[str, str], timeout: float | None, max_restarts: int = 0) -> int:
    """``nodes`` agents on loopback; output prefixed by agent, the first failing agent ends all."""
    endpoint = f"127.0.0.1:{free_port()}"
    cmd = torchrun_command(script, nodes, nproc_per_node, endpoint, script_args, max_restarts,
                           run_id=f"scaleout-{endpoint.rsplit(':', 1)[1]}")
    # gloo must bind to an interface the other agents can reach: on one machine that is loopback.
    # TORCH_DISABLE_SHARE_RDZV_TCP_STORE: after a restart the new group may otherwise read the old group's
    # addresses and fail with "Gloo connectFullMesh failed ... Connection refused" (pytorch #135712).
    envs = [{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **env, "PYTHONUNBUFFERED": "1",
             "GLOO_SOCKET_IFNAME": env.get("GLOO_SOCKET_IFNAME", "lo")}] * nodes
    labels = [f"agent {i}" for i in range(nodes)] if nodes > 1 else ["torchrun"]
    return run_group([cmd] * nodes, envs, labels, timeout)
