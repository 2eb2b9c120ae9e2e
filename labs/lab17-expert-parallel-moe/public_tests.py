"""Public tests for lab 17: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.nn import mlp_forward, mlp_init
from scaleoutai.grading.public import check


def _dense(x, Wg, experts):
    """The dropless top-2 layer on one process, one token at a time, and its load-balancing loss."""
    z = x @ Wg
    P = np.exp(z - z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = np.zeros_like(x)
    counts = np.zeros(Wg.shape[1])
    for t in range(len(x)):
        e1, e2 = np.argsort(-P[t], kind="stable")[:2]
        s = P[t, e1] + P[t, e2]
        for e in (e1, e2):
            y[t] += P[t, e] / s * mlp_forward(experts[e], x[t:t + 1])[0][0]
            counts[e] += 1
    return y, Wg.shape[1] * float(np.sum(counts / (2 * len(x)) * P.mean(axis=0)))


def _check(moe_dropless_ep, Ts, owner, d=4, hidden=5):
    K, E = len(Ts), len(owner)
    rng = np.random.default_rng(sum(Ts) + 10 * E)
    Wg = 2 * rng.standard_normal((d, E)) / np.sqrt(d)
    experts = [mlp_init([d, hidden, d], seed=e) for e in range(E)]
    x = rng.standard_normal((sum(Ts), d))
    shards = np.split(x, np.cumsum(Ts)[:-1])
    owner = np.asarray(owner)

    def worker(comm):
        mine = {int(e): experts[e] for e in np.flatnonzero(owner == comm.rank)}
        return moe_dropless_ep(comm, shards[comm.rank], Wg, owner, mine)

    res = cluster.run(worker, K, backend="sim", timeout=60, quiet=True)
    y, aux = _dense(x, Wg, experts)
    label = f"tokens per rank {Ts}, owner map {owner.tolist()}"
    for r, rows in enumerate(np.split(np.arange(len(x)), np.cumsum(Ts)[:-1])):
        got, got_aux = res.values[r]
        assert isinstance(got, np.ndarray) and got.shape == (len(rows), d), (
            f"{label}: rank {r} must return y of shape ({len(rows)}, {d})")
        np.testing.assert_allclose(got, y[rows], rtol=1e-9, atol=1e-9, err_msg=f"{label}, rank {r}'s y")
        assert np.isclose(float(got_aux), aux, rtol=1e-9), f"{label}: rank {r}'s L_aux is {got_aux}, expected {aux}"


NOTE = ("public tests passed; the grader also tries K = 4 and 5, fewer experts than ranks, float32, ties, the"
        " exact bytes each rank sends each other rank, and real processes")


@check
def route_top2_gates_and_ties(route_top2):
    """route_top2 (shapes, renormalised gates, ties to the smaller id, no tokens)"""
    top2, gates, _ = route_top2(np.ones((1, 1)), np.log([[0.2, 0.5, 0.2, 0.1]]))  # 0 and 2 tie for second
    assert top2.shape == (1, 2) and gates.shape == (1, 2), "route_top2 returns (T, 2) experts and gates"
    assert top2.tolist() == [[1, 0]], f"top-2 of P = [0.2, 0.5, 0.2, 0.1] is [1, 0] (ties: smaller id), got {top2}"
    assert np.allclose(gates, [[5 / 7, 2 / 7]]), "the gates are renormalised over the two chosen experts"
    top2, gates, P = route_top2(np.zeros((1, 3)), np.zeros((3, 4)))
    assert top2.tolist() == [[0, 1]], "ties go to the smaller expert id"
    assert np.allclose(gates, 0.5) and np.allclose(P, 0.25)
    assert route_top2(np.zeros((0, 3)), np.zeros((3, 4)))[0].shape == (0, 2), "no tokens: (0, 2) experts"


@check
def dropless_moe_layer(moe_dropless_ep):
    _check(moe_dropless_ep, [6], [0, 0, 0])
    _check(moe_dropless_ep, [5, 4], [1, 0, 1, 1])
    _check(moe_dropless_ep, [4, 0, 3], [2, 2, 0, 2])
