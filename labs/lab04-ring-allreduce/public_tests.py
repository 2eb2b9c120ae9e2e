"""Public tests for lab 4: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster


def _check(ring_allreduce, K, n, dtype, backend="sim"):
    rng = np.random.default_rng(K * 100 + n)
    data = [(rng.standard_normal(n) * 10).astype(dtype) for _ in range(K)]

    def worker(comm, data):
        return ring_allreduce(comm, data[comm.rank])

    res = cluster.run(worker, K, backend=backend, args=(data,), timeout=60, quiet=True)
    expected = np.sum(np.array(data, dtype=np.float64), axis=0)
    for r in range(K):
        got = res.values[r]
        assert isinstance(got, np.ndarray), f"rank {r} returned {type(got).__name__}, not a NumPy array"
        assert got.dtype == np.dtype(dtype), f"rank {r} returned dtype {got.dtype}, expected {dtype}"
        assert got.shape == (n,), f"rank {r} returned shape {got.shape}, expected ({n},)"
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3, err_msg=f"rank {r}, K={K}, n={n}")
        assert res.stats[r].messages_sent == 2 * (K - 1), (
            f"rank {r} sent {res.stats[r].messages_sent} messages; a ring sends 2(K-1) = {2 * (K - 1)}")
    print(f"ok: K={K}, n={n}, {np.dtype(dtype).name}, {backend}")


def run_public_tests(ring_allreduce):
    _check(ring_allreduce, 1, 4, np.float64)
    _check(ring_allreduce, 2, 6, np.float64)
    _check(ring_allreduce, 4, 10, np.float32)
    print("public tests passed; the grader also checks other world sizes, lengths, dtypes and real processes")
