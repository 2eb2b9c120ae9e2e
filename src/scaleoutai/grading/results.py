"""Result files: the Gradescope ``results.json`` schema, atomic writes, hostile outputs, the gradebook.

Everything a sandbox hands back is read with caps: regular files only (no symlinks), bounded size,
npz members bounded before they are inflated, ``allow_pickle=False``, JSON only.
"""
from __future__ import annotations

import io
import json
import os
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

FILE_CAP = 64 * 1024 * 1024
JSON_CAP = 1024 * 1024
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and os.replace: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_capped(path: Path, cap: int) -> bytes | None:
    """The bytes of a regular file no larger than ``cap``; None for a missing file, a link or a giant."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(cap + 1)[:cap]
    finally:
        os.close(fd)


def load_json(path: Path, cap: int = JSON_CAP) -> Any:
    raw = read_capped(path, cap)
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None


def load_npz(path: Path, cap: int = FILE_CAP) -> dict[str, np.ndarray] | None:
    """Arrays of an npz the sandbox wrote; None when it is not a small, plain npz."""
    raw = read_capped(path, cap)
    if raw is None:
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            infos = z.infolist()
            if len(infos) > 4096 or sum(i.file_size for i in infos) > cap:
                return None
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except Exception:  # noqa: BLE001 - any malformed file is simply "no output"
        return None


def test_entry(name: str, score: float, max_score: float, output: str, visibility: str = "visible",
               status: str | None = None) -> dict:
    status = status or ("passed" if score >= max_score - 1e-9 else "failed")
    return {"name": name, "score": round(float(score), 4), "max_score": float(max_score), "status": status,
            "output": output, "visibility": visibility}


def make_results(tests: list[dict], output: str, wall: float, extra: dict | None = None) -> dict:
    """Gradescope's results.json: score, max_score, tests[], output; ``extra`` lands under "scaleout"."""
    return {"score": round(sum(t["score"] for t in tests), 4), "max_score": sum(t["max_score"] for t in tests),
            "output": output, "execution_time": round(wall, 2), "stdout_visibility": "hidden",
            # plain text everywhere: what a student printed is shown, never rendered as HTML or Markdown
            "output_format": "text", "test_output_format": "text", "test_name_format": "text",
            "tests": tests, "scaleout": extra or {}}


def write_results(path: Path, results: dict) -> None:
    atomic_write(path, json.dumps(results, indent=1))


def rebuild_gradebook(out: Path) -> Path:
    """gradebook.csv from every ``<out>/<id>/results.json``: one row per student, one column per test
    (with hand-graded points, late penalties and the roster's students: ``gradebook.rebuild``)."""
    from .gradebook import rebuild

    return rebuild(out)
