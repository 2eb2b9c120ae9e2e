"""Shared by the grader's tests: write notebooks, read results."""
from __future__ import annotations

import json
from pathlib import Path

RING = '''
import numpy as np

def ring_allreduce(comm, x):
    K, r = comm.size, comm.rank
    chunks = [c.copy() for c in np.array_split(x, K)]
    if K == 1:
        return x.copy()
    for s in range(K - 1):
        comm.send(chunks[(r - s) % K], (r + 1) % K)
        i = (r - s - 1) % K
        chunks[i] = chunks[i] + comm.recv((r - 1) % K)
    for s in range(K - 1):
        comm.send(chunks[(r + 1 - s) % K], (r + 1) % K)
        chunks[(r - s) % K] = comm.recv((r - 1) % K)
    return np.concatenate(chunks)
'''

WRONG = '''
import numpy as np

def ring_allreduce(comm, x):
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
