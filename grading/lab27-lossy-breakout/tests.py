"""Lab 27: distributed breakout over a lossy channel. Each rank gets the graph, the loss rate and the seed;
the grader checks every rank's status, round and colours against the chapter's one-machine DBA (run here,
in the grader), instances with no colouring, 2 real processes, and, from its own trace and recorded
messages, that every send honours the LossyLink draws, the exact message count per link at loss 0 (one
state message per tick, then linger fins) and, under loss, one message per tick on every link plus the
linger, with no more ticks than the rounds plus the messages lost in the whole run."""
from __future__ import annotations

import numpy as np

from scaleoutai.agents.dai_csp import complete_graph, conflicts, mycielski, planted_graph
from scaleoutai.agents.dai_rounds import reference_dba
from scaleoutai.collectives import block_bounds
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after

# (K, n, degree, loss, what) of solvable planted 3-colourings; the graph's seed is drawn in plan()
SOLVABLE = [(1, 14, 3.5, 0.0, ""), (2, 16, 4.0, 0.0, ""), (3, 17, 4.0, 0.0, ", uneven blocks"),
            (5, 13, 4.0, 0.0, ", uneven blocks"), (6, 4, 2.0, 0.0, ": K > n, empty blocks"),
            (2, 16, 4.0, 0.2, ""), (3, 17, 4.0, 0.4, ", uneven blocks"), (5, 11, 3.5, 0.2, ", uneven blocks"),
            (6, 5, 2.0, 0.4, ": K > n, empty blocks"), (4, 12, 3.5, 0.2, ""), (1, 12, 4.0, 0.4, ": one rank")]
UNSOLVABLE = [(3, "K4", 0.0, 20), (2, "K4", 0.4, 20), (3, "Groetzsch", 0.2, 24)]
PROCESS = [(2, 12, 3.5, 0.2, "")]
PROPERTY = 2  # seeded random cases: K, n, degree and loss drawn
LINGER = {0.0: 2, 0.2: 8, 0.4: 12}  # a close fails with chance loss^linger: 3e-6 and 2e-5
MAX_ROUNDS = 300
UNIMPORTABLE = ("scaleoutai.agents.dai_rounds",)  # the chapter's round engine, its detector and reference
ASKS = ("the lab asks for reliable rounds over a lossy link: state messages with round numbers, resent every tick "
        "until the peer's round arrives, and a lingering close")


def _flat(nb: list[list[int]]) -> np.ndarray:
    degrees = [len(row) for row in nb]
    return np.array([len(nb), *degrees, *(j for row in nb for j in row)], dtype=np.int64)


def _graph(rng: np.random.Generator, n: int, degree: float) -> tuple[list[list[int]], int, dict]:
    """A planted 3-colourable graph whose one-machine DBA ends within 5 to 40 rounds (fast cases)."""
    while True:
        gseed, seed = int(rng.integers(1 << 30)), int(rng.integers(1 << 30))
        nb = planted_graph(n, 3, degree, seed=gseed)
        ref = reference_dba(nb, 3, MAX_ROUNDS, seed=seed)
        if ref["status"] == "solved" and 5 <= ref["rounds"] <= 40:
            return nb, seed, ref


def _add(p: Plan, cid: str, kind: str, K: int, nb: list[list[int]], loss: float, seed: int, max_rounds: int,
         ref: dict, label: str) -> None:
    backend = "process" if kind == "process" else "sim"
    case = Case(id=cid, fn="run_breakout", label=label, world_size=K, backend=backend,
                timeout=15 if backend == "process" else 30,
                data={"kind": kind, "nb": nb, "loss": loss, "seed": seed, "max_rounds": max_rounds,
                      "linger": LINGER[loss], "ref": ref, "record_messages": backend == "sim"})
    p.add_in_order(case, [("nb", _flat(nb)), ("=", 3), ("=", loss), ("=", seed), ("=", max_rounds),
                          ("=", LINGER[loss])])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    specs = [("solvable", s) for s in SOLVABLE] + [("process", s) for s in PROCESS]
    for i in range(PROPERTY):
        K, n = int(rng.integers(2, 6)), int(rng.integers(6, 17))
        specs.append(("solvable", (K, n, float(rng.choice([2.5, 3.5, 4.0])), float(rng.choice([0.2, 0.4])),
                                   ": seeded random case")))
    for i, (kind, (K, n, degree, loss, what)) in enumerate(specs):
        nb, seed, ref = _graph(rng, n, degree)
        where = "simulator" if kind != "process" else "2 real processes"
        _add(p, f"c{i:02d}", kind, K, nb, loss, seed, MAX_ROUNDS, ref,
             f"K={K}, n={n}, degree {degree}, loss {loss}, {where}{what}")
    groetzsch = mycielski([[(v + 4) % 5, (v + 1) % 5] for v in range(5)])  # C_5, then Mycielski: 11 nodes
    for i, (K, name, loss, rounds) in enumerate(UNSOLVABLE):
        nb = complete_graph(4) if name == "K4" else groetzsch
        seed = int(rng.integers(1 << 30))
        _add(p, f"u{i}", "unsolvable", K, nb, loss, seed, rounds, reference_dba(nb, 3, rounds, seed=seed),
             f"K={K}, {name} with 3 colours (no colouring exists), loss {loss}, max_rounds={rounds}, simulator")
    return p


def _values(res: CaseResult) -> list[np.ndarray]:
    n = len(res.case.data["nb"])
    return [res.value(r, "result (int64 [status, rounds, colours...])", dtype=np.int64, shape=(n + 2,))
            for r in range(res.case.world_size)]


def _correct(res: CaseResult) -> None:
    c, ref = res.case, res.case.data["ref"]
    nb, n = c.data["nb"], len(c.data["nb"])
    solved = ref["status"] == "solved"
    colours = np.full(n, -1, dtype=np.int64)
    for r, (v, (a, b)) in enumerate(zip(_values(res), block_bounds(n, c.world_size))):
        if v[0] != int(solved):
            raise Fail(f"rank {r} reports status {v[0]}; the chapter's DBA on one machine ends "
                       f"{'solved' if solved else 'unsolved (out of rounds)'} (status {int(solved)}): the same run "
                       f"must come out on every K and every loss rate")
        if v[1] != ref["rounds"]:
            raise Fail(f"rank {r} decided at round {v[1]}; one machine decides at another round (after the first odd "
                       f"round with no violated constraint anywhere, or at max_rounds)")
        outside = np.r_[v[2:2 + a], v[2 + b:]]
        if (outside != -1).any():
            raise Fail(f"rank {r} reports colours for {int((outside != -1).sum())} variable(s) it does not own "
                       f"(its block is block_bounds(n, K)[{r}]; -1 elsewhere)")
        if not solved and (v[2:] != -1).any():
            raise Fail(f"rank {r} reports colours although the run is unsolved: never report an assignment that "
                       f"may violate a constraint")
        colours[a:b] = v[2 + a:2 + b]
    if solved:
        if ((colours < 0) | (colours >= 3)).any():
            raise Fail(f"{int(((colours < 0) | (colours >= 3)).sum())} variable(s) have no colour in 0..k-1")
        if conflicts(nb, colours):
            raise Fail(f"the returned colouring violates {conflicts(nb, colours)} constraint(s)")
        bad = colours != ref["colours"]
        if bad.any():
            raise Fail(f"the colouring is proper but differs from the one-machine run in {int(bad.sum())} of {n} "
                       f"variables: the agents must see exactly the chapter's rounds, whatever the losses")


def correct(res: CaseResult):
    _correct(res)
    return 1.0, ""


def _sends(res: CaseResult) -> dict[int, list[np.ndarray]]:
    out: dict[int, list[np.ndarray]] = {r: [] for r in range(res.case.world_size)}
    for src, _, arr in res.messages:
        out[src].append(arr)
    return out


def _lost(arr: np.ndarray) -> bool:
    return arr.dtype == np.int8 and arr.size == 0


def channel(res: CaseResult):
    """Every send honours LossyLink's draws: a marker exactly where the draw says lost, int64 elsewhere."""
    c = res.case
    for r, sent in _sends(res).items():
        rng = np.random.default_rng([c.data["seed"], r])
        for j, arr in enumerate(sent):
            lost = rng.random() < c.data["loss"]
            if lost != _lost(arr):
                raise Fail(f"rank {r}'s message {j} {'should have been lost' if lost else 'is a lost-marker'} by the "
                           f"LossyLink draws (default_rng([seed, rank]), one draw per send): send every message "
                           f"through LossyLink(comm, loss, seed), never through comm itself, and keep the link as given")
            if not lost and arr.dtype != np.int64:
                raise Fail(f"rank {r}'s message {j} is {arr.dtype}; state messages are int64")
    return 1.0, ""


def _pairs(res: CaseResult) -> tuple[dict, dict]:
    sends: dict[tuple[int, int], int] = {}
    recvs: dict[tuple[int, int], int] = {}
    for e in res.trace:
        table = sends if e.kind == "send" else recvs
        table[(e.rank, e.peer)] = table.get((e.rank, e.peer), 0) + 1
    return sends, recvs


def traffic_lossless(res: CaseResult):
    """Loss 0: exactly rounds + 1 state messages each way on every link, then linger fins, nothing else."""
    graded_after(lambda: _correct(res), "the result")
    c = res.case
    R, L, K = c.data["ref"]["rounds"], c.data["linger"], c.world_size
    sends, recvs = _pairs(res)
    for q in range(K):
        for p in range(K):
            if p == q:
                continue
            s, rv = sends.get((q, p), 0), recvs.get((q, p), 0)
            if s != R + 1 + L or rv != R + 1:
                raise Fail(f"at loss 0, rank {q} sent rank {p} {s} messages and received {rv} from it; the protocol "
                           f"sends one state message per tick for rounds 0..{R} and then linger = {L} fins, "
                           f"{R + 1 + L} in all, and receives {R + 1} ({ASKS})")
    return 1.0, ""


def traffic_lossy(res: CaseResult):
    """Under loss: one message per tick on every link (sends = receives, plus linger once), and no more
    ticks than the rounds plus every message lost in the run."""
    graded_after(lambda: _correct(res), "the result")
    c = res.case
    R, L, K = c.data["ref"]["rounds"], c.data["linger"], c.world_size
    sends, recvs = _pairs(res)
    lost = sum(_lost(arr) for _, _, arr in res.messages)
    for q in range(K):
        for p in range(K):
            if p == q:
                continue
            s, rv = sends.get((q, p), 0), recvs.get((q, p), 0)
            if s - rv not in (0, L):
                raise Fail(f"rank {q} sent rank {p} {s} messages and received {rv} from it (lost ones included): a "
                           f"tick is one message each way, and the close adds linger = {L} once, so the difference "
                           f"is 0 or {L} (no bursts of resends, no acknowledgements on top of the ticks)")
            if rv > R + 1 + lost:
                raise Fail(f"rank {q} received {rv} messages from rank {p}: more ticks than the {R + 1} rounds plus "
                           f"the {lost} messages lost in the whole run (a tick without loss moves the slowest rank "
                           f"one round on)")
    return 1.0, ""


def unsolvable(res: CaseResult):
    _correct(res)
    return 1.0, ""


TESTS = [
    Test("solved_lossless", "loss 0: every rank ends as the chapter's DBA on one machine, a proper colouring "
         "(K = 1, 2, 3, 5, K > n)", select=lambda c: c.data["kind"] == "solvable" and c.data["loss"] == 0,
         check=correct),
    Test("solved_lossy", "loss 0.2 and 0.4: the same round and colours as one machine, every constraint satisfied",
         select=lambda c: c.data["kind"] == "solvable" and c.data["loss"] > 0, check=correct),
    Test("unsolvable", "no colouring exists: unsolved after exactly max_rounds on every rank, no colours reported",
         select=lambda c: c.data["kind"] == "unsolvable", check=unsolvable),
    Test("correct_process", "2 real processes, loss 0.2", select=lambda c: c.data["kind"] == "process",
         check=correct),
    Test("channel", "every send honours the LossyLink draws (the grader's recorded messages)",
         select=lambda c: c.backend == "sim" and c.data["loss"] > 0 and c.world_size > 1, check=channel),
    Test("traffic_lossless", "loss 0: rounds + 1 + linger messages each way on every link (the grader's trace)",
         select=lambda c: c.data["kind"] == "solvable" and c.data["loss"] == 0 and c.world_size > 1,
         check=traffic_lossless),
    Test("traffic_lossy", "under loss: one message per tick each way plus one linger, ticks bounded by the rounds "
         "and the losses (the grader's trace)",
         select=lambda c: c.data["kind"] == "solvable" and c.data["loss"] > 0 and c.world_size > 1,
         check=traffic_lossy),
]
