"""Shared by the grader's tests: write notebooks, read results."""
from __future__ import annotations

import json
from pathlib import Path

HONEST = '''
import numpy as np

def halving_doubling_allreduce(comm, x):
    K, r = comm.size, comm.rank
    acc = x.copy()
    P = 1 << (K.bit_length() - 1)
    R = K - P
    if r < 2 * R and r % 2 == 0:
        comm.send(acc, r + 1)
        acc = comm.recv(r + 1)
    else:
        if r < 2 * R:
            acc = acc + comm.recv(r - 1)
        v = r // 2 if r < 2 * R else r - R
        real = lambda u: 2 * u + 1 if u < R else u + R
        cuts = np.cumsum([0] + [len(b) for b in np.array_split(acc, P)])
        lo, hi, d = 0, P, P // 2
        while d:
            mid = (lo + hi) // 2
            (a, b), (lo, hi) = ((lo, mid), (mid, hi)) if v & d else ((mid, hi), (lo, mid))
            comm.send(acc[cuts[a]:cuts[b]], real(v ^ d))
            acc[cuts[lo]:cuts[hi]] += comm.recv(real(v ^ d))
            d //= 2
        d = 1
        while d < P:
            w = hi - lo
            comm.send(acc[cuts[lo]:cuts[hi]], real(v ^ d))
            lo, hi = (lo - w, hi) if v & d else (lo, hi + w)
            a, b = (lo, lo + w) if v & d else (hi - w, hi)
            acc[cuts[a]:cuts[b]] = comm.recv(real(v ^ d))
            d *= 2
        if r < 2 * R:
            comm.send(acc, r - 1)
    return acc
'''

WRONG = '''
import numpy as np

def halving_doubling_allreduce(comm, x):
    return x.copy()
'''


def notebook(path: Path, *cells: str, tags: dict[int, list[str]] | None = None) -> Path:
    """A minimal nbformat-4 notebook with one code cell per string."""
    tags = tags or {}
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "outputs": [],
                     "metadata": {"tags": tags.get(i, [])}, "source": src} for i, src in enumerate(cells)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


def results(out: Path, sub_id: str) -> dict:
    return json.loads((out / sub_id / "results.json").read_text())


def output_of(res: dict, prefix: str) -> str:
    return "\n".join(t["output"] for t in res["tests"] if t["name"].startswith(prefix))


def gradebook_rows(out: Path) -> dict[str, dict]:
    """``out/gradebook.csv`` as {submission id: row}; fails if one id has two rows."""
    import csv

    table = list(csv.DictReader((out / "gradebook.csv").open()))
    ids = [r["submission"] for r in table]
    assert len(set(ids)) == len(ids), f"two gradebook rows for one student: {ids}"
    return {r["submission"]: r for r in table}
