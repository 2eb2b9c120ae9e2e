"""Batches: find submissions, skip the graded ones, run ``jobs`` sandboxes at a time, resume safely.

Each submission ends in ``<out>/<id>/results.json`` written atomically, so a batch killed halfway and
rerun grades only what is missing, and ``gradebook.csv`` is rebuilt from the files (never appended).
The id is the student's (``roster.py``: file stem, folder name, or the roster's id), so a rerun grades a
changed notebook again into the same folder, and a result graded earlier from the same file under
another name, or under a roster alias, moves to ``<out>/.replaced/``: one row per student.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from . import results as R
from .labs import Lab
from .jail import Limits, kill_uid, probe_mode
from .roster import RESERVED, Roster, clean_id
from .sandbox import UID_BASE, UIDS_PER_SLOT
from ..errors import UserError

log = logging.getLogger("scaleoutai.grading")


@dataclass
class Submission:
    id: str
    notebook: Path | None  # None: the folder holds no single notebook
    problem: str = ""
    from_roster: bool = False  # the id is a roster id (never suffixed: a second submission replaces it)


@dataclass
class Summary:
    graded: int = 0
    failed: int = 0  # ran but could not finish (timeout, kill, exit, unreadable)
    skipped: int = 0
    seconds: float = 0.0
    out: Path = Path(".")
    ids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line each: duplicates, replaced rows, the roster's report

    def line(self) -> str:
        head = (f"graded {self.graded} (of which {self.failed} failed to run), skipped {self.skipped} already "
                f"graded, {self.seconds:.1f} s; gradebook: {self.out / 'gradebook.csv'}")
        return "\n".join([head, *self.notes])


BATCH_NAMES = {"submissions", "submission"}  # a folder named so is always a batch, even holding one notebook


SUFFIXES = (".ipynb", ".py")  # a notebook, or a jupytext py:percent source named on the command line


def _notebooks(d: Path) -> list[Path]:
    """The notebooks in a folder (a .py beside them is a helper, such as public_tests.py)."""
    return sorted(p for p in d.glob("*.ipynb") if p.is_file() and not p.name.startswith("."))


def _named(names: list[str], notebook: Path | None, roster: Roster | None, problem: str = "") -> Submission:
    """The id rule: the roster's id for the first of ``names`` it knows, else the first name, cleaned."""
    hit = roster.resolve(*names) if roster is not None else None
    return Submission(hit or clean_id(names[0]), notebook, problem, from_roster=hit is not None)


def _is_one_students_folder(p: Path, nbs: list[Path], subdirs: list[Path], roster: Roster | None) -> bool:
    """A folder named on the command line holding exactly one notebook is that student's folder of files,
    unless it is named like a batch (``submissions``) or the roster knows the notebook's name, not the folder's."""
    if len(nbs) != 1 or any(_notebooks(d) for d in subdirs) or _name(p).lower() in BATCH_NAMES:
        return False
    return roster is None or roster.resolve(_name(p)) is not None or roster.resolve(nbs[0].stem) is None


def _name(p: Path) -> str:
    """A folder's own name as typed, also for '.' and '..' (links are not followed)."""
    return Path(os.path.abspath(p)).name


def _newest(a: Submission, b: Submission) -> Submission:
    t = [s.notebook.stat().st_mtime if s.notebook else 0.0 for s in (a, b)]
    return b if t[1] > t[0] else a


def find_submissions(paths: list[Path], roster: Roster | None = None,
                     notes: list[str] | None = None) -> list[Submission]:
    """A notebook (id: its stem), a folder of one student's files (id: the folder's name) or a folder of those;
    with ``roster``, a name the roster knows gives its id. Ids are unique and the same on every rerun; two
    submissions of one roster student keep the newest, with a line in ``notes``."""
    found: list[Submission] = []
    for p in paths:
        if p.is_file():
            if p.suffix not in SUFFIXES:
                raise UserError(f"{p} is not a notebook: submit .ipynb files (or py:percent .py sources), or "
                                f"folders of them")
            found.append(_named([p.stem], p, roster))
        elif p.is_dir():
            nbs = _notebooks(p)
            subdirs = sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith("."))
            if _is_one_students_folder(p, nbs, subdirs, roster):
                found.append(_named([_name(p), nbs[0].stem], nbs[0], roster))
                continue
            found += [_named([nb.stem], nb, roster) for nb in nbs]
            for d in subdirs:
                inner = _notebooks(d)
                problem = "" if len(inner) == 1 else f"the folder holds {len(inner)} notebooks; submit exactly one"
                found.append(_named([d.name, *(nb.stem for nb in inner[:1])], inner[0] if len(inner) == 1 else None,
                                    roster, problem))
        else:
            raise UserError(f"{p} does not exist; pass notebooks or folders of submissions")
    kept: dict[str, Submission] = {}
    for s in [s for s in found if s.from_roster]:  # one submission per roster student: the newest
        if s.id in kept:
            other = kept[s.id]
            kept[s.id] = _newest(other, s)
            if notes is not None:
                notes.append(f"{s.id}: two submissions ({other.notebook} and {s.notebook}); grading the newest, "
                             f"{kept[s.id].notebook}")
        else:
            kept[s.id] = s
    taken: set[str] = set(kept)
    unique: list[Submission] = []
    for s in found:  # unique, and never a name the grader writes itself (gradebook.csv)
        if s.from_roster:
            if kept.get(s.id) is s:
                unique.append(s)
            continue
        base, n = s.id, 1
        while s.id in taken or s.id.lower() in RESERVED:
            n += 1
            s.id = f"{base}-{n}"
        taken.add(s.id)
        unique.append(s)
    return unique


def _progress(total: int, quiet: bool):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread in a process that forks
    return tqdm(total=total, unit="nb", desc="grading", disable=quiet or total == 0, file=sys.stderr)


def _digest(path: Path | None) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else ""


def _recorded(out: Path, sid: str) -> dict | None:
    """The ``scaleout`` entries of a result already in ``out``; None when there is no readable result."""
    res = R.load_json(out / sid / "results.json", R.FILE_CAP)
    return (res.get("scaleout") if isinstance(res.get("scaleout"), dict) else {}) if isinstance(res, dict) else None


def _stamp(out: Path, sub: Submission, digest: str, when: datetime | None) -> None:
    """Record who the result is of and which file, its sha256 and submission time, in its results.json."""
    from .late import mtime

    path = out / sub.id / "results.json"
    res = R.load_json(path, R.FILE_CAP)
    if not isinstance(res, dict):
        return
    extra = dict(res.get("scaleout") or {})
    same = extra.get("sha256") == digest and extra.get("submitted")
    stamp = {"student": sub.id, "source": str(sub.notebook.resolve()) if sub.notebook else "", "sha256": digest,
             "submitted": (when.isoformat() if when else extra["submitted"] if same else
                           mtime(sub.notebook).isoformat() if sub.notebook else "")}
    if any(extra.get(k) != v for k, v in stamp.items()):
        R.write_results(path, {**res, "scaleout": {**extra, **stamp}})


def _retire(out: Path, subs: list[Submission], roster: Roster | None) -> list[str]:
    """Move to ``out/.replaced/`` the results that now belong to another id: graded from a file this batch
    grades under another name, or named by a roster alias whose student has a result of their own."""
    ids = {s.id for s in subs}
    sources = {str(s.notebook.resolve()): s.id for s in subs if s.notebook}
    moved = []
    for f in sorted(out.glob("*/results.json")):
        old = f.parent.name
        if old in ids:
            continue
        extra = _recorded(out, old) or {}
        now = sources.get(str(extra.get("source", ""))) or (roster.resolve(old) if roster is not None else None)
        if now and now != old and (now in ids or (out / now / "results.json").is_file()):
            dest = out / ".replaced" / f"{old}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
            dest.parent.mkdir(exist_ok=True)
            os.replace(f.parent, dest)
            moved.append(f"{old} -> {now}")
    return [f"replaced {len(moved)} row(s) now graded under the student's id: {', '.join(moved)}"] if moved else []


def grade_batch(lab: Lab, paths: list[Path], out: Path, jobs: int = 1, limits: Limits | None = None,
                force: bool = False, quiet: bool = False, roster: Roster | None = None, policy=None,
                times: dict[str, datetime] | None = None) -> Summary:
    """Grade every submission under ``paths`` into ``out``; see the module docstring for the guarantees.

    ``roster`` (roster.Roster), ``policy`` (late.LatePolicy) and ``times`` ({id: submission time}) are
    kept in ``out`` for the gradebook; a submission whose notebook changed since it was graded is graded again."""
    t0 = time.perf_counter()
    limits = limits or Limits()
    notes: list[str] = []
    if roster is None:  # the roster of an earlier batch into ``out`` names this one the same way
        from .roster import saved_roster

        roster = saved_roster(out) if out.is_dir() else None
    subs = find_submissions(paths, roster, notes)
    digests = {s.id: _digest(s.notebook) for s in subs}
    out.mkdir(parents=True, exist_ok=True)

    def stale(s: Submission) -> bool:
        extra = _recorded(out, s.id)
        return extra is None or extra.get("sha256", digests[s.id]) != digests[s.id]

    todo = [s for s in subs if force or stale(s)]
    summary = Summary(skipped=len(subs) - len(todo), out=out, ids=[s.id for s in subs], notes=notes)
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
    slots = max(1, min(jobs, len(todo)))  # a slot with nothing to grade would only start a zygote
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
    times = times or {}
    for s in subs:
        _stamp(out, s, digests[s.id], times.get(s.id))
    for sid, when in times.items():  # times for students graded in earlier batches
        extra = None if sid in summary.ids else _recorded(out, sid)
        if extra is not None and extra.get("submitted") != when.isoformat():
            res = R.load_json(out / sid / "results.json", R.FILE_CAP)
            R.write_results(out / sid / "results.json", {**res, "scaleout": {**extra, "submitted": when.isoformat()}})
    summary.notes += _retire(out, subs, roster)
    from . import gradebook, late, roster as rost

    saved = out / rost.SAVED
    if roster is not None and (not saved.is_file() or saved.read_text() != roster.text()):
        R.atomic_write(saved, roster.text())
    if policy is not None:
        R.atomic_write(out / late.SAVED, policy.to_json())
    gradebook.rebuild(out, lab)
    if roster is not None:
        summary.notes += rost.report(roster, sorted(p.parent.name for p in out.glob("*/results.json")))
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
