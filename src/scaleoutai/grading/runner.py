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
from .labs import Lab
from .jail import Limits, kill_uid, probe_mode
from .sandbox import UID_BASE, UIDS_PER_SLOT
from ..errors import UserError

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


RESERVED = {"gradebook.csv", "gradebook", "submissions"}


def _clean_id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "submission"


SUFFIXES = (".ipynb", ".py")  # a notebook, or a jupytext py:percent source named on the command line


def _notebooks(d: Path) -> list[Path]:
    """The notebooks in a folder (a .py beside them is a helper, such as public_tests.py)."""
    return sorted(p for p in d.glob("*.ipynb") if p.is_file() and not p.name.startswith("."))


def find_submissions(paths: list[Path]) -> list[Submission]:
    """A notebook, a folder holding one notebook, or a folder of those; ids are unique and stable."""
    found: list[Submission] = []
    for p in paths:
        if p.is_file():
            if p.suffix not in SUFFIXES:
                raise UserError(f"{p} is not a notebook: submit .ipynb files (or py:percent .py sources), or "
                                f"folders of them")
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
    taken: set[str] = set()
    for s in found:  # unique, and never a name the grader writes itself (gradebook.csv)
        base, n = s.id, 1
        while s.id in taken or s.id.lower() in RESERVED:
            n += 1
            s.id = f"{base}-{n}"
        taken.add(s.id)
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
    base = Path(tempfile.mkdtemp(prefix="scaleout-grade-"))
    os.chmod(base, 0o711)
    slots = max(1, jobs)
    uids, locks = reserve_uids(slots) if isolated else ([UID_BASE + UIDS_PER_SLOT * i for i in range(slots)], [])
    if isolated:
        for first in uids:  # leftovers of a batch that was killed halfway while holding these uids
            for uid in range(first, first + UIDS_PER_SLOT):
                kill_uid(uid)
    try:
        if todo:
            from .slots import run_slots

            bar = _progress(len(todo), quiet)
            try:
                run_slots(lab, todo, out, base, uids, limits, summary, bar.update)
            finally:
                bar.close()
    finally:
        for fd in locks:
            os.close(fd)
        shutil.rmtree(base, ignore_errors=True)
    R.rebuild_gradebook(out)
    summary.seconds = time.perf_counter() - t0
    return summary


def reserve_uids(n: int, pool: int = 256) -> tuple[list[int], list[int]]:
    """Lock ``n`` blocks of UIDS_PER_SLOT sandbox uids for this batch (flock on a file per block), so that
    two batches running at once never share a uid; returns the first uid of each block."""
    import fcntl

    folder = Path(tempfile.gettempdir()) / "scaleout-grader-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    uids: list[int] = []
    locks: list[int] = []
    for uid in range(UID_BASE, UID_BASE + pool * UIDS_PER_SLOT, UIDS_PER_SLOT):
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
    raise RuntimeError(f"all {pool} blocks of sandbox uids are in use by other grading batches; wait for one to finish")
