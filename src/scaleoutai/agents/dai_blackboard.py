"""A blackboard system (Chapter 27; Erman et al. 1980, Nii 1986) that solves Sudoku by cooperation.

The blackboard (the 9 x 9 grid) lives on rank 0 with the controller. Knowledge sources (KS) live on the
other ranks, each an expert in one kind of deduction: ``naked`` (a cell with one candidate left) and
``row``, ``col``, ``box`` (a digit with one possible cell left in a unit). One cycle: the controller posts
the board to every KS rank; each rates each of its KSs (how many cells it could fill now); the controller
picks one (``policy="best"``: the highest rating; ``"fixed"``: the first KS in a fixed order that can
act), tells its rank to act, checks every contribution against the board (an empty cell, a digit still
possible there) and writes it. It stops when the board is full or no KS can contribute. KS s is
hosted on ``replicas`` ranks, so a crashed KS rank (PeerCrashedError) is dropped and a replica covers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm

__all__ = ["SOURCES", "UNITS", "candidates", "knowledge_source", "accept", "make_sudoku", "solve_sudoku",
           "hosts", "reference_blackboard", "blackboard", "run_blackboard"]

SOURCES = ("naked", "row", "col", "box")
_r, _c = np.divmod(np.arange(81), 9)
UNITS = {"row": np.arange(81).reshape(9, 9), "col": np.arange(81).reshape(9, 9).T,
         "box": np.array([np.flatnonzero((_r // 3 == b // 3) & (_c // 3 == b % 3)) for b in range(9)])}
PEERS = [np.unique(np.concatenate([UNITS[u][k] for u, k in (("row", i // 9), ("col", i % 9),
                                                           ("box", 3 * (i // 27) + (i % 9) // 3))])) for i in range(81)]
BOARD, ACT, STOP = 0, 1, 2


def candidates(grid: np.ndarray) -> np.ndarray:
    """(81, 10) bool: cand[i, d] is True when digit d (1..9) may still go in empty cell i."""
    grid = np.asarray(grid).ravel()
    cand = np.zeros((81, 10), dtype=bool)
    for i in np.flatnonzero(grid == 0):
        cand[i, 1:] = True
        cand[i, grid[PEERS[i]]] = False
    cand[:, 0] = False
    return cand


def knowledge_source(name: str, grid: np.ndarray) -> np.ndarray:
    """What KS ``name`` would write on ``grid``: an (m, 2) int array of (cell, digit), sorted by cell."""
    cand = candidates(grid)
    found: dict[int, int] = {}
    if name == "naked":
        for i in np.flatnonzero(cand.sum(axis=1) == 1):
            found[int(i)] = int(np.flatnonzero(cand[i])[0])
    elif name in UNITS:
        for unit in UNITS[name]:
            for d in range(1, 10):
                where = unit[cand[unit, d]]
                if len(where) == 1:
                    found.setdefault(int(where[0]), d)
    else:
        raise ValueError(f"unknown knowledge source {name!r}: choose one of {SOURCES}")
    return np.array(sorted(found.items()), dtype=np.int64).reshape(-1, 2)


def accept(grid: np.ndarray, contributions: np.ndarray) -> int:
    """The controller's check and write: a contribution lands only on an empty cell with that digit possible."""
    written = 0
    for cell, d in contributions:
        if 0 <= cell < 81 and 1 <= d <= 9 and grid[cell] == 0 and d not in grid[PEERS[cell]]:
            grid[cell] = d
            written += 1
    return written


def _choose(ratings: list[tuple[int, int, int]], policy: str) -> tuple[int, int, int] | None:
    """From (rating, KS, rank) pick one with rating > 0: the best (ties: lower KS, lower rank) or the first KS."""
    able = [x for x in ratings if x[0] > 0]
    if not able:
        return None
    if policy == "best":
        return min(able, key=lambda x: (-x[0], x[1], x[2]))
    return min(able, key=lambda x: (x[1], x[2]))


def _policy(policy: str) -> str:
    if policy not in ("best", "fixed"):
        raise ValueError(f"unknown policy {policy!r}: choose 'best' (highest rating) or 'fixed' (first able KS)")
    return policy


def reference_blackboard(grid: np.ndarray, policy: str = "best", max_cycles: int = 200) -> dict[str, Any]:
    """The same controller with every KS on one machine: the board, the KS chosen each cycle, solved or not."""
    board, chosen = np.array(grid, dtype=np.int64).ravel(), []
    for _ in range(max_cycles):
        if np.all(board):
            break
        pick = _choose([(len(knowledge_source(s, board)), k, 0) for k, s in enumerate(SOURCES)], _policy(policy))
        if pick is None:
            break
        accept(board, knowledge_source(SOURCES[pick[1]], board))
        chosen.append(SOURCES[pick[1]])
    return {"grid": board.reshape(9, 9), "chosen": chosen, "solved": bool(np.all(board))}


def hosts(K: int, replicas: int = 1) -> list[list[int]]:
    """The KS indices each rank hosts: KS s on ranks 1 + (s + j) mod (K - 1), j < replicas; rank 0 hosts
    them all when K = 1. Ranks beyond the number of KSs host nothing and take no part."""
    if K == 1:
        return [list(range(len(SOURCES)))]
    if not 1 <= replicas <= K - 1:
        raise ValueError(f"replicas must be between 1 and K - 1 = {K - 1} knowledge-source ranks, got {replicas}")
    out: list[list[int]] = [[] for _ in range(K)]
    for s in range(len(SOURCES)):
        for j in range(replicas):
            r = 1 + (s + j) % (K - 1)
            if s not in out[r]:
                out[r].append(s)
    return [sorted(x) for x in out]


def blackboard(comm: Comm, grid: np.ndarray, policy: str = "best", replicas: int = 1,
               max_cycles: int = 200, seconds_per_ks: float = 1e-4) -> dict[str, Any] | None:
    """Per rank: the controller and blackboard (rank 0) or a KS rank. Chapter 27, Section 4.

    Messages: BOARD = [0, 81 cells] to each live KS rank; a rating per hosted KS back; ACT = [1, KS] to the
    chosen rank; its (cell, digit) pairs back; STOP = [2]. A KS rank waits on rank 0 only.
    """
    mine = hosts(comm.size, replicas)
    if comm.rank > 0:
        return _ks_rank(comm, mine[comm.rank], seconds_per_ks) if mine[comm.rank] else None
    policy = _policy(policy)
    board, chosen, crashed = np.array(grid, dtype=np.int64).ravel(), [], []
    live = [r for r in range(1, comm.size) if mine[r]]
    for _ in range(max_cycles):
        if np.all(board):
            break
        ratings = []
        if comm.size == 1:
            ratings = [(len(knowledge_source(SOURCES[s], board)), s, 0) for s in mine[0]]
        for r in live:
            comm.send(np.concatenate([[BOARD], board]), r)
        for r in list(live):
            try:
                ratings += [(int(n), s, r) for n, s in zip(comm.recv(r), mine[r])]
            except cluster.PeerCrashedError:
                live.remove(r)  # its KSs are gone; a replica elsewhere may still rate them
                crashed.append(r)
        pick = _choose(ratings, policy)
        if pick is None:
            break
        _, s, r = pick
        if r == 0:
            contributions = knowledge_source(SOURCES[s], board)
        else:
            comm.send(np.array([ACT, s]), r)
            try:
                contributions = comm.recv(r).reshape(-1, 2)
            except cluster.PeerCrashedError:
                live.remove(r)
                crashed.append(r)
                continue
        accept(board, contributions)
        chosen.append(SOURCES[s])
    for r in live:
        comm.send(np.array([STOP]), r)
    return {"grid": board.reshape(9, 9), "chosen": chosen, "solved": bool(np.all(board)), "crashed": crashed}


def _ks_rank(comm: Comm, mine: list[int], seconds_per_ks: float) -> None:
    board = np.zeros(81, dtype=np.int64)
    while True:
        msg = comm.recv(0)
        if msg[0] == BOARD:
            board = msg[1:]
            comm.compute(seconds_per_ks * len(mine))  # each KS examines the board
            comm.send(np.array([len(knowledge_source(SOURCES[s], board)) for s in mine], dtype=np.int64), 0)
        elif msg[0] == ACT:
            comm.send(knowledge_source(SOURCES[int(msg[1])], board).ravel(), 0)
        else:
            return None


def run_blackboard(grid: np.ndarray, K: int, policy: str = "best", replicas: int = 1, max_cycles: int = 200,
                   faults: cluster.Faults | None = None, timeout: float = 60.0
                   ) -> tuple[dict[str, Any], cluster.RunResult]:
    """Driver: the blackboard on rank 0, the KSs spread over ranks 1..K-1; returns rank 0's record."""
    grid = np.asarray(grid)
    if grid.size != 81 or grid.min() < 0 or grid.max() > 9:
        raise ValueError(f"grid must be 81 (or 9 x 9) digits 0..9 with 0 for an empty cell, got shape {grid.shape}")
    res = cluster.run(blackboard, K, args=(grid,), kwargs=dict(policy=policy, replicas=replicas,
                                                                max_cycles=max_cycles), faults=faults, timeout=timeout)
    return res.values[0], res


def solve_sudoku(grid: np.ndarray, limit: int = 2) -> tuple[np.ndarray | None, int]:
    """The direct solution: depth-first search on the cell with fewest candidates. Returns the first
    solution and the number found, up to ``limit`` (2 tells a unique puzzle from an ambiguous one)."""
    board, found, first = np.array(grid, dtype=np.int64).ravel(), [0], [None]

    def search() -> None:
        empty = np.flatnonzero(board == 0)
        if len(empty) == 0:
            found[0] += 1
            first[0] = first[0] if first[0] is not None else board.copy()
            return
        cand = candidates(board)
        i = empty[np.argmin(cand[empty].sum(axis=1))]
        for d in np.flatnonzero(cand[i]):
            board[i] = d
            search()
            board[i] = 0
            if found[0] >= limit:
                return

    search()
    return (None if first[0] is None else first[0].reshape(9, 9)), found[0]


def make_sudoku(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(puzzle, solution): a random solved grid, then cells emptied in random order while the four KSs
    together still solve it (so the puzzle is unique and needs no guessing). 0 marks an empty cell."""
    rng = np.random.default_rng(seed)
    pattern = lambda r, c: (3 * (r % 3) + r // 3 + c) % 9  # noqa: E731 - a valid grid; shuffles keep it valid
    rows = np.concatenate([3 * b + rng.permutation(3) for b in rng.permutation(3)])
    cols = np.concatenate([3 * b + rng.permutation(3) for b in rng.permutation(3)])
    digits = rng.permutation(9) + 1
    solution = np.array([[digits[pattern(r, c)] for c in cols] for r in rows])
    puzzle = solution.ravel().copy()
    for i in rng.permutation(81):
        keep, puzzle[i] = puzzle[i], 0
        if not reference_blackboard(puzzle)["solved"]:
            puzzle[i] = keep
    return puzzle.reshape(9, 9), solution
