"""Batches: find submissions, skip the graded ones, run ``jobs`` sandboxes at a time, resume safely.

Each submission ends in ``<out>/<id>/results.json`` written atomically, so a batch killed halfway and
rerun grades only what is missing, and ``gradebook.csv`` is rebuilt from the files (never appended).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import results as R
from .labs import Lab, read_cells
from .sandbox import UID_BASE, Limits, Zygote, kill_uid, probe_mode

log = logging.getLogger("scaleoutai.grading")


@dataclass
class Submission:
    id: str
    notebook: Path | None  # None: the folder holds no single notebook
    problem: str = ""


@dataclass
class Summary:
    graded: int = 0
    failed: int = 0  # ran but could not finish (timeout, kill, exit, unreadable)
    skipped: int = 0
    seconds: float = 0.0
    out: Path = Path(".")
    ids: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"graded {self.graded} (of which {self.failed} failed to run), skipped {self.skipped} already "
                f"graded, {self.seconds:.1f} s; gradebook: {self.out / 'gradebook.csv'}")


def _clean_id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "submission"


def _notebooks(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("*.ipynb") if p.is_file() and not p.name.startswith("."))


def find_submissions(paths: list[Path]) -> list[Submission]:
    """A notebook, a folder holding one notebook, or a folder of those; ids are unique and stable."""
    from scaleoutai.cli import UserError

    found: list[Submission] = []
    for p in paths:
        if p.is_file():
            found.append(Submission(_clean_id(p.stem), p))
        elif p.is_dir():
            nbs = _notebooks(p)
            subdirs = sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith("."))
            if len(nbs) == 1 and not any(_notebooks(d) for d in subdirs):
                found.append(Submission(_clean_id(p.name), nbs[0]))
                continue
            found += [Submission(_clean_id(nb.stem), nb) for nb in nbs]
            for d in subdirs:
                inner = _notebooks(d)
                problem = "" if len(inner) == 1 else f"the folder holds {len(inner)} notebooks; submit exactly one"
                found.append(Submission(_clean_id(d.name), inner[0] if len(inner) == 1 else None, problem))
        else:
            raise UserError(f"{p} does not exist; pass notebooks or folders of submissions")
    seen: dict[str, int] = {}
    for s in found:
        n = seen.get(s.id, 0)
        seen[s.id] = n + 1
        if n:
            s.id = f"{s.id}-{n + 1}"
    return found


def _progress(total: int, quiet: bool):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread in a process that forks
    return tqdm(total=total, unit="nb", desc="grading", disable=quiet or total == 0, file=sys.stderr)


def grade_batch(lab: Lab, paths: list[Path], out: Path, jobs: int = 1, limits: Limits | None = None,
                force: bool = False, quiet: bool = False) -> Summary:
    """Grade every submission under ``paths`` into ``out``; see the module docstring for the guarantees."""
    t0 = time.perf_counter()
    limits = limits or Limits()
    subs = find_submissions(paths)
    out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in subs if force or not (out / s.id / "results.json").is_file()]
    summary = Summary(skipped=len(subs) - len(todo), out=out, ids=[s.id for s in subs])
    if limits.mode == "auto":
        limits.mode = probe_mode()
        if limits.mode == "none":
            log.warning("not running as root: student code runs as this user, with the network and this user's "
                        "files reachable; only rlimits and the timeout apply. Grade as root for isolation.")
        elif limits.mode == "uid":
            log.warning("no mount/network namespaces here: student code runs as an unprivileged uid with rlimits, "
                        "but can reach the network and world-readable files (make grading/ mode 700)")
    isolated = limits.mode in ("full", "uid")
    root = lab.folder.parent.parent
    limits.hide = sorted({str(p.resolve()) for p in [root / "labs", root / "grading", out, *paths] if p.exists()})
    base = Path(tempfile.mkdtemp(prefix="scaleout-grade-"))
    os.chmod(base, 0o711)
    uids, locks = reserve_uids(max(1, jobs)) if isolated else ([UID_BASE + i for i in range(max(1, jobs))], [])
    if isolated:
        limits.hide.append(str(base))
        for uid in uids:  # leftovers of a batch that was killed halfway while holding this uid
            kill_uid(uid)
    zygote = Zygote() if todo else None  # a fresh process, started before the hidden tests are imported
    try:
        if todo:
            from .engine import load_hidden

            hidden = load_hidden(lab)
            _run(hidden, todo, out, base, uids, limits, isolated, zygote, summary, quiet)
    finally:
        if zygote:
            zygote.close()
        for fd in locks:
            os.close(fd)
        shutil.rmtree(base, ignore_errors=True)
    R.rebuild_gradebook(out)
    summary.seconds = time.perf_counter() - t0
    return summary


def reserve_uids(n: int, pool: int = 256) -> tuple[list[int], list[int]]:
    """Lock ``n`` sandbox uids for this batch (flock on a file per uid), so that two batches running at
    once never share a uid: each batch kills every process of its uids after each submission."""
    import fcntl

    folder = Path(tempfile.gettempdir()) / "scaleout-grader-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    uids: list[int] = []
    locks: list[int] = []
    for uid in range(UID_BASE, UID_BASE + pool):
        fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        uids.append(uid)
        locks.append(fd)
        if len(uids) == n:
            return uids, locks
    for fd in locks:
        os.close(fd)
    raise RuntimeError(f"all {pool} sandbox uids are in use by other grading batches; wait for one to finish")


def _run(hidden, todo: list[Submission], out: Path, base: Path, uids: list[int], limits: Limits, isolated: bool,
         zygote: Zygote, summary: Summary, quiet: bool) -> None:
    from .engine import grade_workdir, prepare_workdir, remove_workdir

    bar = _progress(len(todo), quiet)
    cpus = sorted(os.sched_getaffinity(0))
    jobs = len(uids)
    free = list(range(jobs))
    running: dict[str, tuple[Submission, Path, int, list, float]] = {}
    queue = list(todo)

    def finish(sub: Submission, res: dict) -> None:
        R.write_results(out / sub.id / "results.json", res)
        summary.graded += 1
        summary.failed += res["scaleout"].get("status") != "ok"
        bar.update(1)

    while queue or running:
        while queue and free:
            sub = queue.pop(0)
            t = time.perf_counter()
            try:
                cells = read_cells(sub.notebook) if sub.notebook else None
                problem = sub.problem
            except ValueError as exc:
                cells, problem = None, str(exc)
            if cells is None:
                finish(sub, grade_workdir(hidden, None, None, None, limits, error=problem or "no notebook found"))
                continue
            slot = free.pop(0)
            uid = uids[slot] if isolated else None
            workdir = base / f"{sub.id}-{os.urandom(6).hex()}"
            prepare_workdir(workdir, cells, hidden, limits, uid)
            zygote.submit(sub.id, str(workdir), uids[slot], limits, cpus[slot % len(cpus)] if jobs > 1 else None)
            running[sub.id] = (sub, workdir, slot, cells, t)
        for done in zygote.poll(0.05):
            sub, workdir, slot, cells, t = running.pop(done["id"])
            try:
                finish(sub, grade_workdir(hidden, workdir, done, cells, limits, wall=time.perf_counter() - t))
            finally:
                remove_workdir(workdir)
                free.append(slot)
    bar.close()
