"""``cluster.run(..., backend="process")``: one OS process per rank, fail fast, no orphans.

The function and its arguments travel by value (cloudpickle), so code defined in a notebook cell runs.
Each rank writes its outcome to a file in a private temp folder; the parent polls the processes, and
the first rank that fails (or crashes, or the timeout) ends the group: every process group is killed
and the caller gets that rank's traceback.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any, Callable

from .core import Faults, RankCrashed, RankError, RankStats, RunResult, RunTimeout
from .forkserver import Forked, start_rank
from .process import CRASH_EXIT_CODE
from .procs import kill


def relay(stream: IO[bytes], rank: int | str | None, quiet: bool) -> None:
    """Copy a child's output to ours line by line, prefixed "[rank r] " ("[label] " for a str, none for None)."""
    prefix = f"[rank {rank}] " if isinstance(rank, int) else f"[{rank}] " if rank else ""
    for raw in iter(stream.readline, b""):
        if not quiet:
            sys.stdout.write(prefix + raw.decode(errors="replace"))
            sys.stdout.flush()
    stream.close()


def _load(path: str) -> dict[str, Any] | None:
    import cloudpickle

    try:
        with open(path, "rb") as f:
            return cloudpickle.load(f)
    except (OSError, EOFError):
        return None


def _first_failure(tmp: str, procs: list[subprocess.Popen | Forked], faults: Faults) -> Exception:
    """The rank that failed first (by its own timestamp); peers it took down fail later."""
    found = []
    for r, p in enumerate(procs):
        rc = p.poll()
        out = _load(os.path.join(tmp, f"rank{r}.pkl"))
        if rc is None or (rc == 0 and out is not None):
            continue
        if rc == 0:  # an abrupt exit is the cause; peers then fail with "connection closed"
            found.append((-1.0, RankError(r, "exited without writing its result (did it call os._exit?)")))
        elif rc == CRASH_EXIT_CODE:
            found.append((out["time"] if out else 0.0, RankCrashed(r, faults.crash.get(r, 0))))
        elif out and not out.get("ok", True):
            found.append((out["time"], RankError(r, out["summary"], out["traceback"])))
        else:
            why = f"killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
            hint = " (out of memory?)" if rc == -signal.SIGKILL else ""
            found.append((-1.0, RankError(r, f"process {why}{hint} before returning")))
    found.sort(key=lambda t: t[0])
    return found[0][1]


def _pickle_job(path: str, job: dict[str, Any]) -> None:
    """Pickle the job; code from a module a fresh interpreter cannot import travels by value."""
    import importlib.util

    import cloudpickle

    registered = []
    for obj in (job["fn"], *job["args"], *job["kwargs"].values()):
        name = getattr(obj, "__module__", None) if callable(obj) else None
        mod = sys.modules.get(name or "")
        if mod is None or name == "__main__" or name in registered:
            continue
        try:
            importable = importlib.util.find_spec(name) is not None and getattr(mod, "__spec__", None) is not None
        except (ImportError, ValueError):
            importable = False
        if not importable:
            cloudpickle.register_pickle_by_value(mod)
            registered.append(name)
    try:
        with open(path, "wb") as f:
            cloudpickle.dump(job, f)
    finally:
        for name in registered:
            cloudpickle.unregister_pickle_by_value(sys.modules[name])


def run_process(fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict,
                faults: Faults | None, timeout: float, trace: bool, quiet: bool = False) -> RunResult:
    import torch.distributed as dist
    from datetime import timedelta

    faults = faults or Faults()
    faults.check(world_size)
    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="scaleout-run-")
    store = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=timeout), wait_for_workers=False)
    procs: list[subprocess.Popen | Forked] = []
    relays: list[threading.Thread] = []
    try:
        with open(os.path.join(tmp, "sys_path.json"), "w") as f:
            json.dump(list(sys.path), f)
        _pickle_job(os.path.join(tmp, "job.pkl"), {"fn": fn, "args": args, "kwargs": kwargs, "faults": faults,
                                                   "trace": trace, "timeout": timeout})
        env = worker_env(world_size)
        for r in range(world_size):
            argv = [tmp, str(r), str(world_size), str(store.port)]
            p = start_rank(argv, env)  # forked from a warm server: no torch import per rank
            if p is None:
                p = subprocess.Popen([sys.executable, "-m", "scaleoutai.cluster._worker", *argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
            procs.append(p)
            t = threading.Thread(target=relay, args=(p.stdout, r, quiet), daemon=True)
            t.start()
            relays.append(t)
        deadline = t0 + timeout
        while True:
            codes = [p.poll() for p in procs]
            if any(c not in (None, 0) or (c == 0 and not os.path.exists(os.path.join(tmp, f"rank{r}.pkl")))
                   for r, c in enumerate(codes)):
                time.sleep(0.05)  # let a failing rank's peers report, then pick the first failure
                err = _first_failure(tmp, procs, faults)
                kill(procs)
                raise err
            if all(c == 0 for c in codes):
                break
            if time.perf_counter() > deadline:
                running = [r for r, c in enumerate(codes) if c is None]
                kill(procs)
                raise RunTimeout(timeout, running)
            time.sleep(0.005)
        for t in relays:
            t.join(timeout=5)
        outs = [_load(os.path.join(tmp, f"rank{r}.pkl")) for r in range(world_size)]
        missing = [r for r, o in enumerate(outs) if o is None]
        if missing:
            raise RankError(missing[0], "exited without writing its result (did it call os._exit?)")
        stats = [RankStats(**o["stats"]) for o in outs]
        events = sorted((e for o in outs for e in o["trace"]), key=lambda e: (e.start, e.rank)) if trace else None
        return RunResult(values=[o["value"] for o in outs], stats=stats, backend="process",
                         wall_time=time.perf_counter() - t0, trace=events)
    finally:
        kill(procs)
        del store
        shutil.rmtree(tmp, ignore_errors=True)


def worker_env(world_size: int) -> dict[str, str]:
    """Environment for a local worker: loopback transport, and no thread oversubscription."""
    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    threads = max(1, (os.cpu_count() or 1) // world_size)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, str(threads))
    env["PYTHONUNBUFFERED"] = "1"
    return env
