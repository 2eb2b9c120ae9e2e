"""Runs inside the sandbox: execute the student's cells, call their functions on the grader's inputs.

Reads ``cells.json``, ``plan.json`` and ``inputs.npz`` (allow_pickle=False) from the working dir and
writes one ``out/<case>.npz`` (plain arrays) plus ``out/<case>.json`` (types, errors, comm.stats) per
case, each with os.replace, so a submission killed in case 7 still hands back cases 1-6. Nothing
here decides a score: the grader treats every byte written here as hostile.
"""
from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

import numpy as np

STDOUT_CAP = 64 * 1024
ARRAY_CAP = 16 * 1024 * 1024


class _Capped(io.TextIOBase):
    """A stdout that keeps the first STDOUT_CAP characters and drops the rest (printing 100 MB is fine)."""

    def __init__(self, fd: int):
        self.fd, self.n, self.dropped = fd, 0, 0

    def write(self, s: str) -> int:
        room = STDOUT_CAP - self.n
        if room > 0:
            try:
                os.write(self.fd, s[:room].encode(errors="replace"))
            except OSError:
                pass
        self.n += min(len(s), max(room, 0))
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def writable(self) -> bool:
        return True


def _short(exc: BaseException, tb: str = "", limit: int = 1500) -> str:
    if isinstance(exc, SystemExit):
        text = f"called sys.exit({exc.code!r}); a notebook for grading must not exit"
    else:
        text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError):
        text += " (the submission ran out of its memory limit)"
    text = text + ("\n" + tb[-limit:] if tb else "")
    return text[:limit * 2]


def _student_frames(tb: str) -> str:
    """The lines of a traceback that point into the student's cells, not into the communicator."""
    lines = tb.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if "<cell" in line:
            keep += [x.strip() for x in lines[i:i + 2]]
    return ("\n" + "\n".join(keep[-6:])) if keep else ""


def _record(value: Any, key: str, arrays: dict[str, np.ndarray]) -> dict:
    from scaleoutai.cluster import RankCrashed

    if isinstance(value, RankCrashed):
        return {"type": "crashed", "crashed": True}
    meta: dict[str, Any] = {"type": type(value).__name__}
    if isinstance(value, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        try:
            arr = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - ragged lists and the like
            meta["note"] = f"not convertible to an array: {type(exc).__name__}"
            return meta
        if arr.dtype.hasobject or arr.dtype.kind not in "biufc":
            meta["note"] = f"holds {arr.dtype} values, not numbers"
        elif arr.nbytes > ARRAY_CAP:
            meta["note"] = f"too large to hand back ({arr.nbytes} bytes)"
        else:
            arrays[key] = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)  # keeps 0-d as 0-d
            meta.update(stored=True, dtype=arr.dtype.str, shape=list(arr.shape))
    return meta


def _args(case: dict, inputs: Any, rank: int | None) -> list:
    out = []
    for spec in case["args"]:
        if "value" in spec:
            out.append(spec["value"])
        elif spec.get("per_rank"):
            out.append(inputs[f"{spec['key']}/{rank}"].copy())
        else:
            out.append(inputs[spec["key"]].copy())
    return out


def _write(outdir: str, case_id: str, meta: dict, arrays: dict) -> None:
    tmp = os.path.join(outdir, f".{case_id}.npz")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, os.path.join(outdir, f"{case_id}.npz"))
    tmp = os.path.join(outdir, f".{case_id}.json")
    with open(tmp, "w") as f:
        json.dump(meta, f)
    os.replace(tmp, os.path.join(outdir, f"{case_id}.json"))


def run_case(ns: dict, case: dict, inputs: Any, timeout: float) -> tuple[dict, dict, bool]:
    """Run one case; returns (meta, arrays, stuck) where stuck means a thread could not be stopped."""
    from scaleoutai import cluster

    fn = ns.get(case["fn"])
    meta: dict[str, Any] = {"id": case["id"], "ok": False}
    arrays: dict[str, np.ndarray] = {}
    if not callable(fn):
        meta["error"] = f"the notebook defines no function named {case['fn']}()"
        return meta, arrays, False
    t0 = time.perf_counter()
    if case["mode"] == "call":
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn(*_args(case, inputs, None))
            except BaseException as exc:  # noqa: BLE001
                box["error"] = _short(exc) + _student_frames(traceback.format_exc())

        th = threading.Thread(target=target, daemon=True)
        th.start()
        th.join(timeout)
        if th.is_alive():
            meta["error"] = f"{case['fn']}() did not return within {timeout:g} s (an infinite loop?)"
            return meta, arrays, True
        if "error" in box:
            meta["error"] = box["error"]
        else:
            meta["ranks"] = [_record(box.get("value"), "r0", arrays)]
            meta["ok"] = True
    else:
        def worker(comm: Any, *args: Any) -> Any:
            return fn(comm, *args[comm.rank])

        per_rank = tuple(tuple(_args(case, inputs, r)) for r in range(case["world_size"]))
        if case.get("backend") == "process" and not case.get("faults"):
            meta.update(run_forked(fn, case["world_size"], per_rank, timeout, arrays))
            meta["wall"] = time.perf_counter() - t0
            return meta, arrays, False
        crash = {int(r): int(n) for r, n in case.get("faults", {}).get("crash", {}).items()}
        faults = cluster.Faults(crash=crash) if crash else None
        try:
            res = cluster.run(worker, case["world_size"], backend=case.get("backend", "sim"), args=per_rank,
                              faults=faults, timeout=timeout, quiet=True)
        except cluster.RunTimeout as exc:
            meta["error"] = f"did not finish within {timeout:g} s (an infinite loop or a recv nobody sends to?)"
            meta["detail"] = str(exc)
            return meta, arrays, case.get("backend", "sim") == "sim"
        except cluster.RankError as exc:
            hint = " (it ran out of its memory limit)" if exc.summary.startswith("MemoryError") else ""
            meta["error"] = f"rank {exc.rank} failed: {exc.summary}{hint}" + _student_frames(exc.traceback)
        except BaseException as exc:  # noqa: BLE001 - DeadlockError, bad arguments, ...
            meta["error"] = _short(exc, traceback.format_exc(limit=-3))
        else:
            meta["ranks"] = [_record(v, f"r{r}", arrays) for r, v in enumerate(res.values)]
            meta["stats"] = [s.as_dict() for s in res.stats]
            meta["ok"] = True
    meta["wall"] = time.perf_counter() - t0
    return meta, arrays, False


def run_forked(fn: Any, size: int, per_rank: tuple, timeout: float, arrays: dict) -> dict:
    """``size`` real processes forked from this warm one (torch already imported), joined by
    torch.distributed (gloo) through the same ``ProcessComm`` that ``cluster.run(backend="process")`` uses.

    Forking instead of starting fresh interpreters saves two torch imports (~2 CPU-s) per submission.
    """
    import socket

    with socket.socket() as s:  # a private network namespace: nobody else can take this port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="ranks-")  # TMPDIR is the working dir inside the sandbox
    try:
        return _fork_ranks(fn, size, per_rank, timeout, arrays, port, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fork_ranks(fn: Any, size: int, per_rank: tuple, timeout: float, arrays: dict, port: int, tmp: str) -> dict:
    import signal

    from scaleoutai.cluster._worker import call_rank, join_group

    pids = []
    for r in range(size):
        pid = os.fork()
        if pid == 0:
            code, sub, meta = 1, {}, {}
            try:
                comm = join_group(r, size, port, timeout, host_store=True)
                value = call_rank(fn, comm, per_rank[r])
                meta = {"rank": _record(value, "v", sub), "stats": comm.stats.as_dict()}
                code = 0
            except BaseException as exc:  # noqa: BLE001
                meta = {"error": f"rank {r} failed: " + _short(exc) + _student_frames(traceback.format_exc())}
            try:
                _write(tmp, f"rank{r}", meta, sub)
            finally:
                os._exit(code)
        pids.append(pid)
    deadline, codes = time.monotonic() + timeout, {}
    while len(codes) < size and time.monotonic() < deadline:
        for pid in pids:
            if pid not in codes:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes[pid] = os.waitstatus_to_exitcode(status)
        if any(c != 0 for c in codes.values()):
            break
        time.sleep(0.005)
    for pid in pids:
        if pid not in codes:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    metas = []
    for r in range(size):
        try:
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                metas.append(json.load(f))
            sub = dict(np.load(os.path.join(tmp, f"rank{r}.npz"), allow_pickle=False))
            if "v" in sub:
                arrays[f"r{r}"] = sub["v"]
        except OSError:
            metas.append(None)
    errors = [m["error"] for m in metas if m and "error" in m]
    if errors:
        return {"error": errors[0]}
    if len(codes) < size:
        return {"error": f"did not finish within {timeout:g} s (an infinite loop or a recv nobody sends to?)"}
    missing = [r for r, m in enumerate(metas) if m is None]
    if missing:
        return {"error": f"rank {missing[0]} ended without returning (os._exit? killed?)"}
    return {"ok": True, "ranks": [m["rank"] for m in metas], "stats": [m["stats"] for m in metas]}


def exec_cells(cells: list[dict], ns: dict) -> list[dict]:
    """Execute code cells in order like a notebook run with errors allowed; report each failure."""
    report = []
    for i, cell in enumerate(cells):
        if cell.get("skip"):
            continue
        try:
            exec(compile(cell["source"], f"<cell {i + 1}>", "exec"), ns)  # noqa: S102 - the sandbox's job
        except BaseException as exc:  # noqa: BLE001 - SystemExit included
            report.append({"cell": i + 1, "error": _short(exc, traceback.format_exc(limit=-2), 600)})
    return report


def main(workdir: str) -> int:
    log = os.open(os.path.join(workdir, "log.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = sys.stderr = _Capped(1)
    with open(os.path.join(workdir, "plan.json")) as f:
        plan = json.load(f)
    with open(os.path.join(workdir, "cells.json")) as f:
        cells = json.load(f)
    inputs = dict(np.load(os.path.join(workdir, "inputs.npz"), allow_pickle=False))
    outdir = os.path.join(workdir, "out")
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    cell_errors = exec_cells(cells, ns)
    _write(outdir, "_cells", {"cell_errors": cell_errors}, {})
    deadline = time.monotonic() + float(plan.get("budget", 60))
    for case in plan["cases"]:
        left = deadline - time.monotonic()
        timeout = max(0.5, min(float(case.get("timeout", 20)), left))
        meta, arrays, stuck = run_case(ns, case, inputs, timeout)
        _write(outdir, case["id"], meta, arrays)
        if stuck:  # a spinning thread cannot be stopped: end here, the rest are reported as not run
            _write(outdir, "_aborted", {"after": case["id"], "why": meta.get("error", "")}, {})
            break
    else:
        _write(outdir, "_done", {"cases": len(plan["cases"])}, {})
    sys.stdout.flush()
    os._exit(0)
