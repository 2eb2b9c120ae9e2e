"""Distributed constraint satisfaction over the communicator, in synchronous rounds (Chapter 27).

The agents of ``dai_csp`` (one per variable) are spread over K ranks in contiguous blocks
(``block_bounds``: uneven when K does not divide n, empty ranks when K > n). The communicator has no
receive-from-any, so the protocols run in *synchronous rounds*: in round r every agent reads what was
sent to it in round r - 1 (in the order of the sender's index, then of sending) and sends; every rank
then sends exactly one array to each peer rank (the packed messages for the agents there, an empty
array when there are none) and receives one from each. Messages between agents on one rank never
touch the network, but every logical message is counted, so messages and rounds do not depend on K:
the run equals ``reference_abt`` / ``reference_dba`` on one machine, whatever the placement.

Termination is detected by an all-reduce per round (recursive doubling over [messages sent, an agent
found the empty nogood, constraints violated]): ABT stops when a round sends nothing (quiescence: every
agent is consistent with an up-to-date view) or on the empty nogood; DBA when no constraint is violated.
Those all-reduce messages are the detector's cost, reported apart from the protocol's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds, recursive_doubling_allreduce
from .dai_csp import ADDLINK, IMPROVE, NOGOOD, OK, ABTAgent, DBAAgent, Message, Neighbours, _check_graph, induced_graph

__all__ = ["KINDS", "encode", "decode", "reference_abt", "reference_dba", "abt", "dba", "run_abt", "run_dba"]

KINDS = {OK: "ok", NOGOOD: "nogood", ADDLINK: "add-link", IMPROVE: "improve"}


def encode(msgs: list[Message]) -> np.ndarray:
    """Messages as one int64 array: per message [3 + len(data), to, from, kind, *data]."""
    flat: list[int] = []
    for dst, src, kind, data in msgs:
        flat += [3 + len(data), dst, src, kind, *data]
    return np.array(flat, dtype=np.int64)


def decode(a: np.ndarray) -> list[Message]:
    out, at, a = [], 0, a.tolist()
    while at < len(a):
        n = a[at]
        out.append((a[at + 1], a[at + 2], a[at + 3], tuple(a[at + 4:at + 1 + n])))
        at += 1 + n
    return out


def _agents(algo: str, nb: Neighbours, k: int, mine: range, seed: int) -> dict[int, Any]:
    if algo == "abt":
        return {i: ABTAgent(i, nb, k) for i in mine}
    return {i: DBAAgent(i, nb, k, seed) for i in mine}


def _step(algo: str, agents: dict[int, Any], r: int, inbox: dict[int, list[Message]]) -> list[Message]:
    """Round r for the given agents: what they send (round 0: their first messages)."""
    out: list[Message] = []
    for i, agent in agents.items():
        got = sorted(inbox.get(i, ()), key=lambda m: m[1])  # stable: each sender's order is kept
        if r == 0:
            out += agent.start()
        elif algo == "abt":
            for m in got:
                out += agent.receive(m)
        else:
            out += agent.round(r, got)
    return out


def _status(algo: str, r: int, sent: int, unsat: int, violated: int) -> str | None:
    if algo == "abt":
        return "unsatisfiable" if unsat else ("solved" if r > 0 and sent == 0 else None)
    return "solved" if r % 2 == 1 and violated == 0 else None


def _violated(algo: str, agents: dict[int, Any], r: int) -> int:
    return sum(a.violated for a in agents.values()) if algo == "dba" and r % 2 == 1 else 0


def _reference(algo: str, nb: Neighbours, k: int, max_rounds: int, seed: int) -> dict[str, Any]:
    _check_graph(nb, k)
    agents = _agents(algo, nb, k, range(len(nb)), seed)
    inbox: dict[int, list[Message]] = {}
    counts = dict.fromkeys(KINDS.values(), 0)
    status, r = "max_rounds", 0
    for r in range(max_rounds + 1):
        out = _step(algo, agents, r, inbox)
        unsat = int(any(getattr(a, "unsat", False) for a in agents.values()))
        status = _status(algo, r, len(out), unsat, _violated(algo, agents, r)) or status
        if status != "max_rounds":
            break
        inbox = {}
        for m in out:
            inbox.setdefault(m[0], []).append(m)
            counts[KINDS[m[2]]] += 1
    return _record(agents, len(nb), status, r, counts)


def _record(agents: dict[int, Any], n: int, status: str, r: int, counts: dict[str, int]) -> dict[str, Any]:
    colours = -np.ones(n, dtype=np.int64)
    for i, a in agents.items():
        colours[i] = -1 if a.value is None else a.value
    return {"status": status, "colours": None if status != "solved" else colours, "rounds": r,
            "messages": sum(counts.values()), "by_kind": counts}


def reference_abt(nb: Neighbours, k: int, max_rounds: int = 10_000) -> dict[str, Any]:
    """ABT on one machine, in the same synchronous rounds: the record every placement must reproduce."""
    return _reference("abt", nb, k, max_rounds, 0)


def reference_dba(nb: Neighbours, k: int, max_rounds: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """DBA on one machine, in the same synchronous rounds (a cycle is two rounds: ok?, improve)."""
    return _reference("dba", nb, k, max_rounds, seed)


def _rounds(comm: Comm, algo: str, nb: Neighbours, k: int, max_rounds: int, seed: int) -> dict[str, Any]:
    """Per rank: its block of agents, one exchange with each peer rank per round, one all-reduce per round."""
    bounds = block_bounds(len(nb), comm.size)
    owner = np.repeat(np.arange(comm.size), [b - a for a, b in bounds])
    mine = range(*bounds[comm.rank])
    links = induced_graph(nb) if algo == "abt" else nb  # every message ABT can send stays in the induced graph
    peers = sorted({int(owner[j]) for i in mine for j in links[i]} - {comm.rank})
    agents = _agents(algo, nb, k, mine, seed)
    inbox: dict[int, list[Message]] = {}
    counts = dict.fromkeys(KINDS.values(), 0)
    status, r, detector = "max_rounds", 0, 0
    for r in range(max_rounds + 1):
        out = _step(algo, agents, r, inbox)
        unsat = int(any(getattr(a, "unsat", False) for a in agents.values()))
        before = comm.stats.messages_sent
        total = recursive_doubling_allreduce(comm, np.array([len(out), unsat, _violated(algo, agents, r)]))
        detector += comm.stats.messages_sent - before
        status = _status(algo, r, *map(int, total)) or status
        if status != "max_rounds":
            break
        inbox, remote = {}, {p: [] for p in peers}
        for m in out:
            counts[KINDS[m[2]]] += 1
            if owner[m[0]] == comm.rank:
                inbox.setdefault(m[0], []).append(m)
            elif int(owner[m[0]]) in remote:
                remote[int(owner[m[0]])].append(m)
            else:
                raise RuntimeError(f"agent {m[1]} sent to agent {m[0]} outside its links: a bug in the agent")
        for p in peers:
            comm.send(encode(remote[p]), p)
        for p in peers:
            for m in decode(comm.recv(p)):
                inbox.setdefault(m[0], []).append(m)
    rec = _record(agents, len(nb), status, r, counts)
    rec.update(values={i: agents[i].value for i in mine}, peers=peers, detector_messages=detector)
    return rec


def abt(comm: Comm, nb: Neighbours, k: int, max_rounds: int = 10_000) -> dict[str, Any]:
    """Asynchronous backtracking, per rank, in synchronous rounds. Chapter 27, Section 4."""
    return _rounds(comm, "abt", nb, k, max_rounds, 0)


def dba(comm: Comm, nb: Neighbours, k: int, max_rounds: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """The distributed breakout algorithm, per rank, in synchronous rounds. Chapter 27, Section 4."""
    return _rounds(comm, "dba", nb, k, max_rounds, seed)


def _run(algo: str, nb: Neighbours, k: int, K: int, max_rounds: int, seed: int, faults: cluster.Faults | None,
         network: cluster.Network | None, timeout: float) -> tuple[dict[str, Any], cluster.RunResult]:
    _check_graph(nb, k)
    fn = abt if algo == "abt" else dba
    kwargs = dict(max_rounds=max_rounds) if algo == "abt" else dict(max_rounds=max_rounds, seed=seed)
    res = cluster.run(fn, K, args=(nb, k), kwargs=kwargs, faults=faults, network=network, timeout=timeout)
    parts = res.values
    counts = {kind: sum(p["by_kind"][kind] for p in parts) for kind in KINDS.values()}
    colours = -np.ones(len(nb), dtype=np.int64)
    for p in parts:
        for i, v in p["values"].items():
            colours[i] = -1 if v is None else v
    status = parts[0]["status"]
    return {"status": status, "colours": colours if status == "solved" else None, "rounds": parts[0]["rounds"],
            "messages": sum(counts.values()), "by_kind": counts,
            "detector_messages": sum(p["detector_messages"] for p in parts)}, res


def run_abt(nb: Neighbours, k: int, K: int, max_rounds: int = 10_000, faults: cluster.Faults | None = None,
            network: cluster.Network | None = None, timeout: float = 120.0) -> tuple[dict[str, Any], cluster.RunResult]:
    """Driver: ABT with the variables in blocks over K ranks; the record (as ``reference_abt``) and the run."""
    return _run("abt", nb, k, K, max_rounds, 0, faults, network, timeout)


def run_dba(nb: Neighbours, k: int, K: int, max_rounds: int = 10_000, seed: int = 0,
            faults: cluster.Faults | None = None, network: cluster.Network | None = None,
            timeout: float = 120.0) -> tuple[dict[str, Any], cluster.RunResult]:
    """Driver: DBA with the variables in blocks over K ranks; the record (as ``reference_dba``) and the run."""
    return _run("dba", nb, k, K, max_rounds, seed, faults, network, timeout)
