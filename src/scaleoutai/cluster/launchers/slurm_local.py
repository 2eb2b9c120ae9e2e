"""A real one-node Slurm cluster in a temp folder: munged, slurmctld and slurmd (Appendix B, ch33).

Everything is private to the folder: a fresh munge key and socket, a slurm.conf on free (non-default)
ports, state and spool folders, logs. Nothing under /etc is touched, so it coexists with a site Slurm.
Client commands (sbatch, srun, sinfo) find this cluster through ``SLURM_CONF``; ``env()`` gives it.

    with LocalSlurm() as slurm:
        subprocess.run(["sinfo"], env=slurm.env())

Needs root (slurmd starts jobs as their user) and the Debian packages slurm-wlm and munge
(environments/slurm/install-ci.sh installs them).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..procs import free_ports, stop

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sinfo")


def _which(cmd: str) -> str | None:
    return shutil.which(cmd) or next((p for p in (f"/usr/sbin/{cmd}", f"/sbin/{cmd}") if os.access(p, os.X_OK)),
                                     None)


def unavailable_reason() -> str | None:
    """Why a private Slurm cannot start here (None when it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "a private Slurm needs root (slurmd launches jobs); run as root or use a site Slurm"
    missing = [c for c in DAEMONS if _which(c) is None]
    if missing:
        return f"missing {', '.join(missing)}: run environments/slurm/install-ci.sh (apt slurm-wlm munge)"
    return None


def _node_line() -> str:
    """The node's hardware as slurmd itself reports it, so slurmctld never drains it for a mismatch."""
    out = subprocess.run([_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True,
                         timeout=30).stdout
    first = out.splitlines()[0] if out else "CPUs=1"
    hw = re.sub(r"^NodeName=\S+\s*", "", first)
    return f"NodeName=localhost NodeAddr=127.0.0.1 {hw} State=UNKNOWN"


class LocalSlurm:
    """Start (``__enter__``) and stop (``__exit__``) a private one-node cluster; ``timeout`` for readiness."""

    def __init__(self, root: str | os.PathLike | None = None, timeout: float = 60.0):
        why = unavailable_reason()
        if why:
            raise RuntimeError(why)
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="scaleout-slurm-"))
        self.timeout = timeout
        self.procs: list[subprocess.Popen] = []
        self.conf = self.root / "slurm.conf"
        self.socket = self.root / "munge" / "munge.socket"

    def env(self) -> dict[str, str]:
        """This process's environment pointed at the private cluster (SLURM_CONF)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _start(self, cmd: list[str], log: str) -> None:
        out = open(self.root / log, "ab")
        self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           env=self.env(), start_new_session=True))
        out.close()

    def _munge(self) -> None:
        d = self.root / "munge"
        d.mkdir(mode=0o700)
        key = d / "munge.key"
        subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True, timeout=30,
                       capture_output=True)
        key.chmod(0o600)
        self._start([_which("munged"), "--foreground", "--force", f"--socket={self.socket}",
                     f"--key-file={key}", f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
                     f"--seed-file={d / 'munged.seed'}"], "munged.out")

    def _write_conf(self) -> None:
        ctld_port, slurmd_port = free_ports(2)
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(exist_ok=True)
        r = self.root
        self.conf.write_text("\n".join([
            "ClusterName=scaleout", "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            f"StateSaveLocation={r / 'state'}", f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}", f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'slurmctld.log'}", f"SlurmdLogFile={r / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "MpiDefault=none", "ReturnToService=2",
            "SchedulerParameters=sched_interval=1", "SlurmctldTimeout=30", "SlurmdTimeout=30",
            _node_line(), "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + self.timeout
        last = ""
        while time.monotonic() < deadline:
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{os.path.basename(dead[0])} exited while starting; see {self.root}/*.log")
            res = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True,
                                 env=self.env(), timeout=15)
            last = (res.stdout + res.stderr).strip()
            if res.returncode == 0 and last.rstrip("*") == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the private Slurm node was not idle after {self.timeout:.0f} s (sinfo: {last!r}); "
                           f"see {self.root}/slurmctld.log and slurmd.log")

    def __enter__(self) -> "LocalSlurm":
        try:
            self._munge()
            for _ in range(100):  # munged creates its socket a moment after it starts
                if self.socket.exists():
                    break
                time.sleep(0.05)
            self._write_conf()
            self._start([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
            self._start([_which("slurmd"), "-D", "-N", "localhost", "-f", str(self.conf)], "slurmd.out")
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill the daemons (and anything they left in their process groups), remove the folder."""
        stop(list(reversed(self.procs)))
        self.procs.clear()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __exit__(self, *exc: object) -> None:
        self.stop()
