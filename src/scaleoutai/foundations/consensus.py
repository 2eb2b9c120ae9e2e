"""Chapter 2: agreeing despite crashes. Fault-tolerance arithmetic, bully election, a majority-replicated log.

Crash-stop faults: tolerating f needs K >= 2f + 1 (two majorities of K always share a rank).
Byzantine faults: K >= 3f + 1. The simulator is synchronous with a perfect failure detector:
``comm.recv(src)`` from a crashed rank raises ``cluster.PeerCrashedError`` instead of waiting.
Messages are int64 arrays; every function is deterministic for a given ``cluster.Faults``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..cluster import Comm, PeerCrashedError

__all__ = ["majority", "min_nodes", "max_faults", "bully_election", "replicate_log", "TERM"]

TERM = 1  # one fixed term: the leader is already elected (see bully_election)
_MODELS = {"crash": 2, "byzantine": 3}


def _model(model: str) -> int:
    if model not in _MODELS:
        raise ValueError(f"fault model {model!r} is not known: choose 'crash' or 'byzantine'")
    return _MODELS[model]


def majority(K: int) -> int:
    """Smallest quorum whose copies any other quorum must overlap: floor(K/2) + 1."""
    if K < 1:
        raise ValueError(f"K must be >= 1, got {K}")
    return K // 2 + 1


def min_nodes(f: int, model: str = "crash") -> int:
    """Fewest ranks that tolerate f faults: 2f + 1 for crash-stop, 3f + 1 for Byzantine."""
    if f < 0:
        raise ValueError(f"f must be >= 0, got {f}")
    return _model(model) * f + 1


def max_faults(K: int, model: str = "crash") -> int:
    """Most faults K ranks tolerate: floor((K-1)/2) crash-stop, floor((K-1)/3) Byzantine."""
    if K < 1:
        raise ValueError(f"K must be >= 1, got {K}")
    return (K - 1) // _model(model)


def _msg(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def bully_election(comm: Comm) -> int:
    """Bully election: the highest rank that survives the election leads. Returns the leader's rank.

    1. ELECTION: rank r sends to every higher rank.   2. OK: r answers each lower rank it heard from.
    3. r collects OKs from higher ranks; a crashed one (PeerCrashedError) does not answer.
    4. COORDINATOR: with no OK, r leads. Otherwise r takes the leader named by the highest rank that
       answered and is still alive to tell it (ranks below forward the name), or leads itself if none is.
    Every rank sends its COORDINATOR to the lower ranks, highest first, so a crash mid-announcement
    leaves a top block of informed ranks that pass the name down: the survivors agree.
    """
    r, K = comm.rank, comm.size
    for h in range(r + 1, K):
        comm.send(_msg(r), h)                        # ELECTION
    for low in range(r):
        try:
            comm.recv(low)
        except PeerCrashedError:
            continue
        comm.send(_msg(r), low)                      # OK: I am alive and higher, stand down
    answered = []
    for h in range(r + 1, K):
        try:
            comm.recv(h)
            answered.append(h)
        except PeerCrashedError:
            pass
    leader = r
    for h in reversed(answered):                     # the highest informant who is still alive
        try:
            leader = int(comm.recv(h)[0])
            break
        except PeerCrashedError:
            continue
    for low in reversed(range(r)):
        comm.send(_msg(leader), low)                 # COORDINATOR (or forward the leader's name)
    return leader


def replicate_log(comm: Comm, commands: Sequence[int], leader: int = 0) -> dict[str, Any]:
    """A Raft-style replicated log with a fixed term and leader (no elections, no log repair).

    The leader sends AppendEntries [term, index, command, leader_commit] to each live follower, one
    entry at a time; a follower appends and acks [term, index]. Entry i commits once a majority
    (the leader included) stores it, and then every earlier entry is committed too. A follower that
    crashes is detected by PeerCrashedError and skipped; a final AppendEntries with index -1 is the
    heartbeat that tells followers the commit index. With f < K/2 crashes every entry commits; with
    f >= K/2 none past the crashes can. Returns {"role", "log", "commit_index", "acks"}.
    """
    r, K = comm.rank, comm.size
    need = majority(K)
    if r == leader:
        log: list[int] = []
        commit, live = -1, [f for f in range(K) if f != leader]
        acks = []
        for i, cmd in enumerate(commands):
            log.append(int(cmd))
            for f in live:
                comm.send(_msg(TERM, i, int(cmd), commit), f)
            held = 1                                  # the leader's own copy
            for f in list(live):
                try:
                    term, index = comm.recv(f)
                except PeerCrashedError:
                    live.remove(f)                    # perfect detector: stop sending to it
                    continue
                held += int(term == TERM and index == i)
            acks.append(held)
            if held >= need:
                commit = i                            # a majority holds entries 0..i: commit them all
        for f in live:
            comm.send(_msg(TERM, -1, 0, commit), f)   # heartbeat carrying the final commit index
        return {"role": "leader", "log": log, "commit_index": commit, "acks": acks}
    log, commit = [], -1
    while True:
        try:
            term, index, cmd, leader_commit = comm.recv(leader)
        except PeerCrashedError:
            break                                     # the leader is gone: a new election is needed
        commit = max(commit, min(int(leader_commit), len(log) - 1))
        if index < 0:
            break
        log.append(int(cmd))
        comm.send(_msg(int(term), int(index)), leader)
    return {"role": "follower", "log": log, "commit_index": commit, "acks": []}
