"""Public tests for lab 14: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _expected(w0, data, rounds, lr, steps, lr_g, crash, grad):
    """The protocol of the lab, serially: (w, c) after every round."""
    d, n_clients = len(w0), len(data) - 1
    w, c = np.array(w0, dtype=np.float64), np.zeros(d)
    ctrl = {q: np.zeros(d) for q in range(1, len(data))}
    rows = []
    for t in range(int(rounds)):
        ups = []
        for q in [q for q in ctrl if crash.get(q, rounds) > t]:
            v = w.copy()
            for _ in range(steps):
                v -= lr * (grad(v, *data[q]) - ctrl[q] + c)
            old, ctrl[q] = ctrl[q], ctrl[q] - c + (w - v) / (steps * lr)
            ups.append((v - w, ctrl[q] - old))
        if ups:
            w = w + lr_g * sum(u for u, _ in ups) / len(ups)
            c = c + sum(v for _, v in ups) / n_clients
        rows.append([w, c])
    return np.array(rows)


NOTE = ("public tests passed; the grader also tries K up to 8, empty clients, everyone dropping, "
        "heterogeneous clients against FedAvg, 3 processes")


@check
def client_round_one_step(client_round, grad):
    """client_round, one step"""
    rng = np.random.default_rng(3)
    d = 3
    X, y = rng.standard_normal((6, d)), rng.standard_normal(6)
    dy, dc = client_round(np.ones(d), np.zeros(d), np.zeros(d), X, y, 0.1, 1)
    np.testing.assert_allclose(dy, -0.1 * grad(np.ones(d), X, y), rtol=1e-12, err_msg="one step, c = c_i = 0")
    np.testing.assert_allclose(dc, grad(np.ones(d), X, y), rtol=1e-12, err_msg="option II after one step")


@check
def scaffold_rounds_with_dropout(scaffold, grad):
    rng = np.random.default_rng(3)
    d = 3
    rng.standard_normal((6, d)), rng.standard_normal(6)  # the one-step check's data: the cases below stay as they were
    for K, crash, lr_g in ((2, {}, 1.0), (3, {}, 0.5), (4, {2: 1}, 1.0)):
        sizes = [0] + [int(n) for n in rng.integers(2, 12, size=K - 1)]
        data = [(rng.standard_normal((n, d)), rng.standard_normal(n)) for n in sizes]
        w0 = rng.standard_normal(d)
        res = cluster.run(lambda comm: scaffold(comm, w0, *data[comm.rank], 3, 0.05, 2, lr_g), K, timeout=30,
                          faults=cluster.Faults(crash=crash) if crash else None)
        got = res.values[0]
        assert isinstance(got, np.ndarray) and got.shape == (3, 2, d), "the server returns a (rounds, 2, d) array"
        np.testing.assert_allclose(got, _expected(w0, data, 3, 0.05, 2, lr_g, crash, grad), rtol=1e-10,
                                   atol=1e-13, err_msg=f"(w, c) after each round, K={K}, drops {crash}")
