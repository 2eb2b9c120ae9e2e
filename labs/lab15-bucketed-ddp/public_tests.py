"""Public tests for lab 15: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.nn import mlp_backward, mlp_forward, mlp_init, mse_loss
from scaleoutai.grading.public import check


def _one_machine(X, Y, params, steps, lr):
    p = {k: v.copy() for k, v in params.items()}
    for _ in range(steps):
        out, cache = mlp_forward(p, X)
        _, g = mlp_backward(p, cache, mse_loss(out, Y)[1])
        for k in p:
            p[k] -= lr * g[k]
    return p


def _check_traffic(res, K, G, buckets, what):
    N = -(-K // G)
    for e in res.trace:
        if e.kind == "send" and e.rank // G != e.peer // G:
            assert e.rank % G == 0 and e.peer % G == 0, (
                f"{what}: rank {e.rank} sent to rank {e.peer} on another node; only node leaders "
                f"(ranks 0, {G}, {2 * G}, ...) may cross nodes, and only to another leader")
    for r in range(K):
        g = min(K, (r // G + 1) * G) - (r // G) * G  # ranks on r's node
        want = buckets * (2 * (N - 1) + g - 1 if r % G == 0 else 1)
        assert res.stats[r].messages_sent == want, (
            f"{what}: rank {r} sent {res.stats[r].messages_sent} messages, expected {want}")


def _check_allreduce(hierarchical_allreduce, K, G):
    rng = np.random.default_rng(K)
    shapes = {"W0": (3, 4), "b0": (4,), "W1": (4, 2), "b1": (2,)}
    data = [{k: rng.standard_normal(s) for k, s in shapes.items()} for _ in range(K)]
    res = cluster.run(lambda comm: hierarchical_allreduce(comm, data[comm.rank], G, 48), K, backend="sim",
                      timeout=60, quiet=True, trace=True)
    for r in range(K):
        got = res.values[r]
        assert isinstance(got, dict) and list(got) == list(shapes), (
            f"rank {r} must return a dict with keys {list(shapes)}")
        for k in shapes:
            np.testing.assert_allclose(got[k], sum(d[k] for d in data), rtol=1e-12, atol=1e-12,
                                       err_msg=f"K={K}, G={G}, rank {r}, tensor {k}")
    # 48-byte buckets in reverse order: [b1, W1] (16 + 64 bytes), [b0, W0]: 2 buckets
    _check_traffic(res, K, G, 2, f"hierarchical_allreduce K={K}, G={G}")


def _check_train(ddp_train, K, G, B):
    rng = np.random.default_rng(100 + K)
    X, Y = rng.standard_normal((B, 3)), rng.standard_normal((B, 2))
    params = mlp_init([3, 5, 2], seed=K)
    res = cluster.run(ddp_train, K, backend="sim", args=(X, Y, params, 3, 0.1, G, 1 << 20), timeout=60,
                      quiet=True, trace=True)
    expected = _one_machine(X, Y, params, 3, 0.1)
    for r in range(K):
        for k in expected:
            np.testing.assert_allclose(res.values[r][k], expected[k], rtol=1e-9, atol=1e-9,
                                       err_msg=f"ddp_train K={K}, G={G}, B={B}, rank {r}, tensor {k}")
    _check_traffic(res, K, G, 3, f"ddp_train K={K}, G={G} (3 steps, one bucket)")


NOTE = ("public tests passed; the grader also tries nodes of unequal size, K > B, float32, frozen tensors, "
        "byte counts and real processes")


@check
def hierarchical_sums(hierarchical_allreduce):
    for K, G in ((1, 1), (2, 1), (2, 2), (4, 2)):
        _check_allreduce(hierarchical_allreduce, K, G)


@check
def ddp_matches_one_process(ddp_train):
    _check_train(ddp_train, 1, 1, 8)
    _check_train(ddp_train, 4, 2, 8)
