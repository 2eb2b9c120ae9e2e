"""Public tests for lab 14: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster


def _expected(w0, data, rounds, lr, steps, crash, local_train):
    w, out = np.array(w0, dtype=np.float64), []
    for t in range(rounds):
        reps = [(len(data[q][1]), local_train(w, *data[q], lr, steps)) for q in range(1, len(data))
                if crash.get(q, rounds) > t]
        total = sum(n for n, _ in reps)
        if total > 0:
            w = sum(n * m for n, m in reps) / total
        out.append(w)
    return np.array(out)


def run_public_tests(fedavg, local_train):
    rng = np.random.default_rng(3)
    d = 4
    for K, crash in ((2, {}), (3, {}), (4, {2: 1})):
        sizes = [0] + [int(n) for n in rng.integers(2, 12, size=K - 1)]
        data = [(rng.standard_normal((n, d)), rng.standard_normal(n)) for n in sizes]
        w0 = rng.standard_normal(d)
        res = cluster.run(lambda comm: fedavg(comm, w0, *data[comm.rank], 3, 0.05, 2), K, timeout=30,
                          faults=cluster.Faults(crash=crash) if crash else None)
        got = res.values[0]
        assert isinstance(got, np.ndarray) and got.shape == (3, d), "the server returns a (rounds, d) array"
        np.testing.assert_allclose(got, _expected(w0, data, 3, 0.05, 2, crash, local_train), rtol=1e-10,
                                   err_msg=f"global models, K={K}, drops {crash}")
        print(f"ok: K={K}, clients dropping {crash or 'none'}")
    print("public tests passed; the grader also tries K up to 8, empty clients, everyone dropping, 3 processes")
