"""Scale "local": K OS processes of the script on this machine, wired like torchrun would (Appendix B).

Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and MASTER_ADDR/PORT (a free port on
loopback), so the script's ``cluster.init()`` joins one gloo group. ``run_group`` is the fail-fast
supervisor every launcher here shares: output relayed line by line with a prefix, the first process
that exits non-zero ends the group (its whole process group is killed) and its status is returned.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Mapping, Sequence

from ..procs import free_port, kill
from ..spawn import relay

TIMEOUT_STATUS = 124  # what coreutils `timeout` returns: scripts and CI read it the same way


def run_group(cmds: Sequence[Sequence[str]], envs: Sequence[Mapping[str, str]], labels: Sequence[int | str],
              timeout: float | None = None, quiet: bool = False) -> int:
    """Run the commands together; return 0 when all exit 0, else the first non-zero status.

    Fail fast: one failure kills every other process group. ``timeout`` (seconds) kills all and
    returns 124 with a message naming the processes still running.
    """
    procs: list[subprocess.Popen] = []
    relays: list[threading.Thread] = []
    t0 = time.monotonic()
    try:
        for cmd, env, label in zip(cmds, envs, labels):
            p = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=dict(env), start_new_session=True)
            procs.append(p)
            t = threading.Thread(target=relay, args=(p.stdout, label, quiet), daemon=True)
            t.start()
            relays.append(t)
        while True:
            codes = [p.poll() for p in procs]
            failed = [(lab, c) for lab, c in zip(labels, codes) if c not in (None, 0)]
            if failed:
                kill(procs)
                for t in relays:
                    t.join(timeout=5)
                label, code = failed[0]
                who = f"rank {label}" if isinstance(label, int) else (label or "the launcher")
                print(f"scaleout run: {who} exited with status {code}; stopped the others", file=sys.stderr)
                return code if code > 0 else 128 - code  # killed by signal n: the shell's 128 + n
            if all(c == 0 for c in codes):
                for t in relays:
                    t.join(timeout=5)
                return 0
            if timeout is not None and time.monotonic() - t0 > timeout:
                running = [str(lab) for lab, c in zip(labels, codes) if c is None]
                kill(procs)
                print(f"scaleout run: timed out after {timeout:g} s; killed {', '.join(running)}",
                      file=sys.stderr)
                return TIMEOUT_STATUS
            time.sleep(0.02)
    finally:
        kill(procs)


def rank_env(base: Mapping[str, str], rank: int, local_rank: int, world: int, local_world: int,
             addr: str, port: int) -> dict[str, str]:
    """The torchrun-compatible variables ``cluster.init()`` reads."""
    return {**base, "RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(local_world), "GROUP_RANK": "0", "MASTER_ADDR": addr,
            "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"}


def run_local(script: str, workers: int, script_args: Sequence[str], env: Mapping[str, str],
              timeout: float | None) -> int:
    """``workers`` processes of ``python SCRIPT ARGS`` with rank variables on loopback."""
    from ..spawn import worker_env

    port = free_port()
    cmd = [sys.executable, script, *script_args]
    base = {**worker_env(workers), **env}  # loopback gloo, one BLAS thread share per rank
    envs = [rank_env(base, r, r, workers, workers, "127.0.0.1", port) for r in range(workers)]
    return run_group([cmd] * workers, envs, list(range(workers)), timeout)
