# %% [markdown]
# # Lab 27: distributed breakout over a lossy channel
#
# Chapter 27 ran the distributed breakout algorithm (DBA) over the communicator in **synchronous
# rounds**: every round each rank sends one array to each peer rank and receives one from each, and an
# all-reduce per round tells every rank whether a constraint is still violated. Section 6 stopped
# there: on a link that loses messages (`Faults(loss=...)`) the first lost array surfaces as a
# `MessageLostError` and the run fails. This lab makes DBA survive the loss. The agents stay the
# chapter's (`scaleoutai.agents.dai_csp.DBAAgent`, importable here): what you write is the layer under
# them, **reliable rounds from idempotent state messages with round numbers**, the **detection of the
# end** without an all-reduce, and the **close** of every link, which no finite protocol can make sure
# of (the two generals' problem).
#
# **The instance.** Graph colouring with k colours: `nb[i]` lists the neighbours of node i (an edge
# forbids equal colours). Variable i is agent `DBAAgent(i, nb, k, seed)`; rank r owns the agents of its
# contiguous block `block_bounds(n, K)[r]` (`scaleoutai.collectives.block_bounds`: uneven blocks when K
# does not divide n, empty ones when K > n). A round r of the agents is exactly the chapter's: round 0
# is `agent.start()`, round r >= 1 is `agent.round(r, inbox)` with the messages sent to that agent in
# round r - 1 (an agent message is `(to, from, kind, (value,))`). After an odd round r, the run is
# **solved** when the sum of `agent.violated` over all agents is 0; it stops **unsolved** after round
# `max_rounds` (DBA cannot prove that no colouring exists: it runs out of rounds). These are the
# chapter's rules, so on every K and every loss rate the run must end exactly as `reference_dba` on one
# machine: the same round, the same colours.
#
# **The channel.** `LossyLink(comm, loss, seed)` below is the only way your ranks may talk (the grader
# checks it): each `send` draws once from `default_rng([seed, rank])`, as `cluster.Faults(loss=, seed=)`
# does, and a lost message still travels, as an empty int8 marker, so the receiver's `recv` raises
# `MessageLostError` at the moment it would have arrived (a timeout that fired). Links are FIFO. A
# message that is sent and never received is harmless; a `recv` that nobody sends to deadlocks.
#
# **The protocol you build** (full mesh: every rank talks to every other rank; with K = 1 nobody talks).
#
# 1. **State messages.** Rank q at round r holds, for each peer p, the agent messages its agents sent
#    to p's agents in round r, and its own violated count v_r (the sum of its agents' `violated` after
#    an odd round, 0 after an even one). The message to p is one int64 array
#    `[r, fin, v_r, m_r, *quads_r, v_{r-1}, m_{r-1}, *quads_{r-1}]` (the part of round r - 1 is left out
#    when r = 0): quads are the agent messages as rows `(to, from, kind, value)`, m their count. Since a
#    rank never runs two rounds ahead of a peer, carrying rounds r and r - 1 is enough, and a message
#    received twice changes nothing (idempotent).
# 2. **Ticks.** While undecided, a rank repeats a *tick*: send its state message to every open peer (in
#    rank order), then receive one message from every open peer (in rank order); a lost one is skipped.
#    After the tick it advances while it holds round r from every peer: with all the round-r counts it
#    decides (solved after an odd round with a total of 0, unsolved at `max_rounds`), or it runs round
#    r + 1 of its agents with the round-r messages addressed to them (its own included).
# 3. **The close.** A rank that has decided needs nothing more, but its peers may still lack its last
#    state. It sends its final state with `fin = 1` **`linger` times** to every peer whose `fin` it has
#    not seen, and returns. A rank that receives a `fin` from p stops sending to p and receiving from p
#    (p has decided, so it needs nothing and will send only `fin`s). If all `linger` copies are lost the
#    peer waits forever: the chance is loss^linger, and the grader passes a linger long enough (TCP's
#    TIME_WAIT plays the same part).
#
# **What every rank returns**: an int64 array of length n + 2: `[status, rounds, colour_0, ...]`,
# status 1 (solved) or 0 (unsolved), `rounds` the round at which it decided, and the colours of **its
# own** variables when solved, -1 everywhere else (never an assignment when unsolved).
#
# **What the grader checks.** Every constraint satisfied, the same status, round and colours as one
# machine for K = 1, 2, 3, 5 and K > n, at loss 0, 0.2 and 0.4; an instance with no colouring (K_4 and
# the Groetzsch graph with 3 colours) reported unsolved after exactly `max_rounds`; 2 real processes. From
# its own trace and recorded messages: every send honours the `LossyLink` draws; at loss 0, exactly
# `rounds + 1 + linger` messages each way on every link (one per tick, no retransmission when nothing is
# lost); under loss, on every link, a rank sends as many messages as it receives, plus `linger` if it
# decided before hearing the peer's `fin` (one message per tick: no bursts, no resending on top of the
# ticks), and at most `rounds + 1` plus the number of messages lost in the whole run ticks.
# `scaleoutai.agents.dai_rounds` (the chapter's round engine, its all-reduce detector and its reference)
# cannot be imported in the grader.

# %% tags=["parameters"]
K = 3  # smoke: 2
N_NODES = 15  # smoke: 10
LOSS = 0.3  # smoke: 0.3
LINGER = 8  # smoke: 8
MAX_ROUNDS = 200  # smoke: 200
SEED = 27  # smoke: 27

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents.dai_csp import DBAAgent, complete_graph, is_proper, mycielski, planted_graph
from scaleoutai.collectives import block_bounds

MARKER = np.zeros(0, dtype=np.int8)  # what a lost message looks like on the wire


class LossyLink:
    """The lab's channel (given, do not change it: the grader replays its draws). One draw per send from
    default_rng([seed, rank]); a lost message travels as MARKER and the receiver's recv raises
    MessageLostError, as on the simulator with cluster.Faults(loss=loss, seed=seed)."""

    def __init__(self, comm, loss, seed):
        self.comm = comm
        self.rank, self.size = comm.rank, comm.size
        self.loss = float(loss)
        self._rng = np.random.default_rng([int(seed), comm.rank])

    def send(self, arr, dst):
        lost = self.loss > 0 and self._rng.random() < self.loss
        self.comm.send(MARKER if lost else np.ascontiguousarray(arr, dtype=np.int64), dst)

    def recv(self, src):
        got = self.comm.recv(src)
        if got.dtype == np.int8 and got.size == 0:
            raise cluster.MessageLostError(self.rank, src)
        return got


# %%
def pack_state(r, fin, v_cur, quads_cur, v_prev, quads_prev):
    """One state message: int64 [r, fin, v_r, m_r, *quads_r, v_{r-1}, m_{r-1}, *quads_{r-1}]; quads are
    (m, 4) int64 rows (to, from, kind, value); the round r - 1 part is left out when r == 0."""
    ### BEGIN SOLUTION
    head = [np.array([r, fin, v_cur, len(quads_cur)], dtype=np.int64), np.ravel(quads_cur).astype(np.int64)]
    if r >= 1:  # round 0 has no round before it
        head += [np.array([v_prev, len(quads_prev)], dtype=np.int64), np.ravel(quads_prev).astype(np.int64)]
    return np.concatenate(head)
    ### END SOLUTION


# %%
def unpack_state(msg):
    """The inverse of pack_state: (r, fin, {round: (v, quads (m, 4) int64)}) with rounds r and r - 1."""
    ### BEGIN SOLUTION
    msg = np.asarray(msg, dtype=np.int64)
    r, fin = int(msg[0]), int(msg[1])
    parts, at, rnd = {}, 2, r
    while at < len(msg) and rnd >= max(r - 1, 0):
        v, m = int(msg[at]), int(msg[at + 1])
        parts[rnd] = (v, msg[at + 2:at + 2 + 4 * m].reshape(m, 4))
        at, rnd = at + 2 + 4 * m, rnd - 1
    if at != len(msg) or r not in parts:
        raise ValueError(f"a state message of {len(msg)} numbers does not parse (round {r})")
    return r, fin, parts
    ### END SOLUTION


# %%
def lossy_breakout(comm, nb, k, loss, seed, max_rounds, linger):
    """DBA over LossyLink(comm, loss, seed) with the agents of block_bounds(n, K)[rank]; every rank returns
    int64 [status, rounds, colours...] (its own colours when solved, -1 elsewhere)."""
    ### BEGIN SOLUTION
    link = LossyLink(comm, loss, seed)
    n, me = len(nb), comm.rank
    bounds = block_bounds(n, comm.size)
    owner = np.empty(n, np.int64)
    for q, (a, b) in enumerate(bounds):
        owner[a:b] = q
    lo, hi = bounds[me]
    agents = {i: DBAAgent(i, nb, k, seed) for i in range(lo, hi)}
    heard = {p: {} for p in range(comm.size) if p != me}  # peer -> round -> (v, rows for my agents)

    def by_rank(msgs):  # one round's agent messages as (m, 4) rows per destination rank
        rows = np.array([(to, src, kind, data[0]) for to, src, kind, data in msgs], dtype=np.int64).reshape(-1, 4)
        return {q: rows[owner[rows[:, 0]] == q] for q in range(comm.size)}

    mine = {0: (0, by_rank([m for a in agents.values() for m in a.start()]))}  # round -> (v, rows per rank)
    live, r = set(heard), 0

    def settle():
        """Advance while every peer's state of round r is in hand; 1 or 0 once decided, None to keep ticking."""
        nonlocal r
        while all(r in got for got in heard.values()):
            total = mine[r][0] + sum(got[r][0] for got in heard.values())
            if r % 2 == 1 and total == 0:
                return 1
            elif r == max_rounds:
                return 0
            box = {i: [] for i in agents}  # round r + 1 reads every round-r message to my agents, mine too
            for row in np.vstack([mine[r][1][me]] + [got[r][1] for got in heard.values()]).tolist():
                box[row[0]].append((row[0], row[1], row[2], (row[3],)))
            r += 1
            sent = [m for i, a in agents.items() for m in a.round(r, box[i])]
            mine[r] = (sum(a.violated for a in agents.values()) if r % 2 == 1 else 0, by_rank(sent))
            mine.pop(r - 2, None)
            for got in heard.values():
                got.pop(r - 2, None)
        return None

    def state(p, fin):
        v, rows = mine[r]
        pv, prow = mine[r - 1] if r >= 1 else (0, rows)
        return pack_state(r, fin, v, rows[p], pv, prow[p])

    status = settle()
    while status is None:  # one tick: a state message to every open peer, then one from each
        for p in sorted(live):
            link.send(state(p, 0), p)
        closed = set()
        for p in sorted(live):
            try:
                _, fin, parts = unpack_state(link.recv(p))
            except cluster.MessageLostError:  # the next tick carries the same state (or a newer one)
                parts, fin = {}, 0
            heard[p].update({q: part for q, part in parts.items() if q >= r})
            if fin:
                closed.add(p)
        live -= closed
        status = settle()
    for p in sorted(live):  # the close: the peer may still lack my last state
        final = state(p, 1)
        for _ in range(linger):
            link.send(final, p)
    answer = np.full(n + 2, -1, dtype=np.int64)
    answer[:2] = status, r
    if status == 1:
        answer[2 + lo:2 + hi] = [agents[i].value for i in range(lo, hi)]
    return answer
    ### END SOLUTION


# %%
def run_breakout(comm, nb_flat, k, loss, seed, max_rounds, linger):
    """What the grader calls on every rank: the graph comes as a flat int64 array [n, deg_0, ..., deg_{n-1},
    neighbours of 0, neighbours of 1, ...]."""
    flat = np.asarray(nb_flat, dtype=np.int64).reshape(-1)
    n = int(flat[0])
    ends = np.cumsum(flat[1:n + 1]) + n + 1
    nb = [flat[e - d:e].tolist() for e, d in zip(ends, flat[1:n + 1])]
    return lossy_breakout(comm, nb, int(k), float(loss), int(seed), int(max_rounds), int(linger))


def flatten(nb):
    return np.array([len(nb)] + [len(x) for x in nb] + [j for x in nb for j in x], dtype=np.int64)


# %% [markdown]
# Try it on the simulator, on a planted 3-colourable graph, without loss and with loss `LOSS`: the
# colours and the round must be those of one machine running the chapter's DBA (written out here, in
# `one_machine`, since `dai_rounds` is not importable in the grader). Then an instance with no
# colouring: every rank must report "unsolved" after exactly `max_rounds`, and no colours.

# %% tags=["demo"]
def one_machine(nb, k, seed, max_rounds):
    agents = [DBAAgent(i, nb, k, seed) for i in range(len(nb))]
    out = [m for a in agents for m in a.start()]
    for r in range(1, max_rounds + 1):
        inbox = {}
        for m in out:
            inbox.setdefault(m[0], []).append(m)
        out = [m for a in agents for m in a.round(r, inbox.get(a.i, []))]
        if r % 2 == 1 and sum(a.violated for a in agents) == 0:
            return 1, r, np.array([a.value for a in agents])
    return 0, max_rounds, None


def assemble(values, n):
    got = np.full(n, -1, dtype=np.int64)
    for v in values:
        got = np.where(v[2:] >= 0, v[2:], got)
    return got


try:
    nb = planted_graph(N_NODES, 3, 4.0, seed=SEED)
    want = one_machine(nb, 3, SEED, MAX_ROUNDS)
    for loss in (0.0, LOSS):
        res = cluster.run(run_breakout, K, args=(flatten(nb), 3, loss, SEED, MAX_ROUNDS, LINGER), trace=True)
        colours = assemble(res.values, N_NODES)
        assert all(v[0] == want[0] and v[1] == want[1] for v in res.values), "status or round differ from one machine"
        assert is_proper(nb, colours, 3) and np.array_equal(colours, want[2]), "colours differ from one machine"
        lost = sum(1 for e in res.trace if e.kind == "recv" and e.nbytes == 0)
        print(f"loss {loss}: solved at round {want[1]}, {sum(s.messages_sent for s in res.stats)} messages "
              f"({lost} lost)")
    groetzsch = mycielski([[1, 4], [0, 2], [1, 3], [2, 4], [0, 3]])
    for name, graph in (("K4", complete_graph(4)), ("Groetzsch", groetzsch)):
        res = cluster.run(run_breakout, K, args=(flatten(graph), 3, LOSS, SEED, 20, LINGER))
        assert all(v[0] == 0 and v[1] == 20 and (v[2:] == -1).all() for v in res.values)
        print(f"{name}: unsolved after 20 rounds on every rank, no colours reported")
except cluster.ClusterError as err:  # a rank failed, a deadlock (a recv nobody sends to), a timeout
    print("lossy_breakout failed:", str(err).splitlines()[0][:300])

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
