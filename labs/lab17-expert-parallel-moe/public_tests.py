"""Public tests for lab 17: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.parallel.moe_dense import moe_forward_dense, moe_init


def _check(moe_forward_ep, K, T, E, k, cf, d=4, hidden=6):
    layer = moe_init(d, hidden, E, seed=K * 10 + E)
    layer["Wg"] = 3 * layer["Wg"]
    x = np.random.default_rng(T).standard_normal((T, d))
    shards, blocks = np.array_split(x, K), np.array_split(np.arange(E), K)

    def worker(comm):
        mine = {int(e): layer["experts"][e] for e in blocks[comm.rank]}
        return moe_forward_ep(comm, shards[comm.rank], layer["Wg"], mine, k, cf)

    res = cluster.run(worker, K, backend="sim", timeout=60, quiet=True)
    dense, cache = moe_forward_dense(layer, x, k, cf)
    for r, rows in enumerate(np.array_split(np.arange(T), K)):
        got = res.values[r]
        assert isinstance(got, np.ndarray) and got.shape == (len(rows), d), (
            f"rank {r} must return an array of shape ({len(rows)}, {d})")
        np.testing.assert_allclose(got, dense[rows], rtol=1e-9, atol=1e-9,
                                   err_msg=f"K={K}, T={T}, E={E}, k={k}, C_f={cf}, rank {r}")
    print(f"ok: K={K}, T={T}, E={E}, k={k}, C_f={cf} ({cache['stats']['dropped']} assignments dropped)")


def run_public_tests(moe_forward_ep):
    _check(moe_forward_ep, 1, 8, 4, 1, 2.0)
    _check(moe_forward_ep, 2, 10, 4, 1, 1.0)
    _check(moe_forward_ep, 2, 10, 3, 2, 0.5)
    print("public tests passed; the grader also tries K = 4, more ranks than experts, empty token shards, "
          "float32, bytes sent and real processes")
