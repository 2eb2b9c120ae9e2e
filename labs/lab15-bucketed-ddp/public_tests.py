"""Public tests for lab 15: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.nn import mlp_backward, mlp_forward, mlp_init, mse_loss


def _one_machine(X, Y, params, steps, lr):
    p = {k: v.copy() for k, v in params.items()}
    for _ in range(steps):
        out, cache = mlp_forward(p, X)
        _, g = mlp_backward(p, cache, mse_loss(out, Y)[1])
        for k in p:
            p[k] -= lr * g[k]
    return p


def _check_allreduce(bucketed_allreduce, K):
    rng = np.random.default_rng(K)
    shapes = {"W0": (3, 4), "b0": (4,), "W1": (4, 2), "b1": (2,)}
    data = [{k: rng.standard_normal(s) for k, s in shapes.items()} for _ in range(K)]
    res = cluster.run(lambda comm: bucketed_allreduce(comm, data[comm.rank], 48), K, backend="sim",
                      timeout=60, quiet=True)
    for r in range(K):
        got = res.values[r]
        assert isinstance(got, dict) and list(got) == list(shapes), (
            f"rank {r} must return a dict with keys {list(shapes)}")
        for k in shapes:
            np.testing.assert_allclose(got[k], sum(d[k] for d in data), rtol=1e-12, atol=1e-12,
                                       err_msg=f"K={K}, rank {r}, tensor {k}")
    # 48-byte buckets in reverse order: [b1, W1] (16 + 64 bytes), [b0, W0]: 2 buckets
    assert res.stats[0].messages_sent == 2 * 2 * (K - 1), (
        f"K={K}: rank 0 sent {res.stats[0].messages_sent} messages; 2 buckets cost 2 * 2(K-1) = {4 * (K - 1)}")
    print(f"ok: bucketed_allreduce with K={K}")


def _check_train(ddp_train, K, B):
    rng = np.random.default_rng(100 + K)
    X, Y = rng.standard_normal((B, 3)), rng.standard_normal((B, 2))
    params = mlp_init([3, 5, 2], seed=K)
    res = cluster.run(ddp_train, K, backend="sim", args=(X, Y, params, 3, 0.1, 64), timeout=60, quiet=True)
    expected = _one_machine(X, Y, params, 3, 0.1)
    for r in range(K):
        for k in expected:
            np.testing.assert_allclose(res.values[r][k], expected[k], rtol=1e-9, atol=1e-9,
                                       err_msg=f"ddp_train K={K}, B={B}, rank {r}, tensor {k}")
    print(f"ok: ddp_train with K={K}, B={B}")


def run_public_tests(bucketed_allreduce, ddp_train):
    for K in (1, 2, 3):
        _check_allreduce(bucketed_allreduce, K)
    _check_train(ddp_train, 1, 8)
    _check_train(ddp_train, 2, 8)
    _check_train(ddp_train, 3, 7)
    print("public tests passed; the grader also tries K = 5, K > B, float32, frozen tensors and real processes")
