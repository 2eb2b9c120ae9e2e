"""Public tests for lab 27: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents.dai_csp import DBAAgent, is_proper, planted_graph
from scaleoutai.grading.public import check


def _one_machine(nb, k, seed, max_rounds):
    agents = [DBAAgent(i, nb, k, seed) for i in range(len(nb))]
    out = [m for a in agents for m in a.start()]
    for r in range(1, max_rounds + 1):
        inbox = {}
        for m in out:
            inbox.setdefault(m[0], []).append(m)
        out = [m for a in agents for m in a.round(r, inbox.get(a.i, []))]
        if r % 2 == 1 and sum(a.violated for a in agents) == 0:
            return r, np.array([a.value for a in agents])
    return max_rounds, None


def _check(run_breakout, flatten, K, n, loss, linger):
    nb = planted_graph(n, 3, 3.0, seed=n)
    rounds, want = _one_machine(nb, 3, 7, 300)
    res = cluster.run(run_breakout, K, args=(flatten(nb), 3, loss, 7, 300, linger), trace=True, timeout=60)
    got = np.full(n, -1)
    for r, v in enumerate(res.values):
        v = np.asarray(v)
        assert v.shape == (n + 2,) and v.dtype == np.int64, f"K={K}: rank {r} must return int64 of shape ({n + 2},)"
        assert v[0] == 1 and v[1] == rounds, f"K={K}, loss={loss}: rank {r} reports status {v[0]} at round {v[1]}, " \
                                             f"one machine solves it at round {rounds}"
        got = np.where(v[2:] >= 0, v[2:], got)
    assert is_proper(nb, got, 3) and np.array_equal(got, want), f"K={K}, loss={loss}: the colours differ from one machine"
    if loss == 0 and K > 1:
        for q in range(K):
            for p in range(K):
                sent = sum(1 for e in res.trace if e.kind == "send" and e.rank == q and e.peer == p)
                assert q == p or sent == rounds + 1 + linger, \
                    f"K={K}, loss 0: rank {q} sent rank {p} {sent} messages, expected rounds + 1 + linger"


NOTE = ("public tests passed; the grader also checks other K, heavier loss, unsolvable instances, real "
        "processes and its own trace")


@check
def state_messages_round_trip(pack_state, unpack_state):
    quads = np.array([[3, 1, 0, 2], [4, 1, 0, 2]])
    msg = pack_state(5, 0, 2, quads, 0, np.zeros((0, 4), np.int64))
    assert msg.dtype == np.int64 and msg[:4].tolist() == [5, 0, 2, 2], "pack_state: [r, fin, v_r, m_r, ...] first"
    r, fin, parts = unpack_state(msg)
    assert (r, fin) == (5, 0) and sorted(parts) == [4, 5] and np.array_equal(parts[5][1], quads), \
        "unpack_state must give back rounds r and r - 1"
    assert sorted(unpack_state(pack_state(0, 1, 0, quads, 0, quads))[2]) == [0], "round 0 carries no round -1"


@check
def breakout_solves(run_breakout, flatten):
    _check(run_breakout, flatten, 1, 10, 0.0, 2)
    _check(run_breakout, flatten, 3, 14, 0.0, 2)
    _check(run_breakout, flatten, 3, 14, 0.3, 12)
