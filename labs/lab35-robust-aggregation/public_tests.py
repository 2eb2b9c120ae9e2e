"""Public tests for lab 35: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _expect_value_error(fn, what):
    try:
        fn()
    except ValueError:
        return
    raise AssertionError(f"{what} must raise ValueError")


def _weiszfeld_two_steps(V, c, nu):
    """Two smoothed Weiszfeld steps from the weighted mean, written out (tol = 0, max_iter = 2)."""
    z = (c[:, None] * V).sum(axis=0) / c.sum()
    for _ in range(2):
        b = c / np.maximum(nu, np.linalg.norm(V - z, axis=1))
        z = (b[:, None] * V).sum(axis=0) / b.sum()
    return z


NOTE = ("public tests passed; the grader also tries K up to 9, float32, empty shards, four attacks, its own "
        "round counts and 3 processes")


@check
def weiszfeld_steps(geometric_median):
    """geometric_median on a hand-made example"""
    # three points of an equilateral-ish triangle and one far outlier
    V = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.5], [40.0, -30.0]])
    ones = np.ones(4)
    z = geometric_median(V, ones, 1, 1e-6, 0.0, 2)
    np.testing.assert_allclose(z, _weiszfeld_two_steps(V, ones, 1e-6), rtol=1e-12,
                               err_msg="two Weiszfeld steps from the mean (tol = 0, max_iter = 2)")
    z = geometric_median(V, ones, 1, 1e-6, 1e-12, 500)
    r = np.linalg.norm(V[:3] - [1.0, 0.5], axis=1).max()  # honest mean (1, 0.5); W_H = 3, W_B = 1
    assert np.linalg.norm(z - [1.0, 0.5]) <= 2 * 3 / (3 - 1) * r, "one attacker of four: within the bound"
    assert geometric_median(V.astype(np.float32), ones, 1, 1e-6, 1e-9, 50).dtype == np.float32, "keep the dtype"
    np.testing.assert_allclose(geometric_median(V[:1], [3], 0, 1e-6, 1e-9, 10), V[0], err_msg="K = 1")
    zero_last = geometric_median(V, [1, 1, 1, 0], 1, 1e-6, 1e-12, 500)
    three = geometric_median(V[:3], [1, 1, 1], 1, 1e-6, 1e-12, 500)
    np.testing.assert_allclose(zero_last, three, atol=1e-6, err_msg="a count of 0 weighs nothing")


@check
def limits_raise(geometric_median):
    """the limits"""
    # three points of an equilateral-ish triangle and one far outlier
    V = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.5], [40.0, -30.0]])
    ones = np.ones(4)
    _expect_value_error(lambda: geometric_median(V, ones, 2, 1e-6, 1e-9, 10), "f = 2 of K = 4 (needs 2f < K)")
    _expect_value_error(lambda: geometric_median(V, ones, 1, 0.0, 1e-9, 10), "nu = 0")
    _expect_value_error(lambda: geometric_median(V, np.zeros(4), 1, 1e-6, 1e-9, 10), "counts summing to 0")


@check
def robust_aggregate_protocol(geometric_median, robust_aggregate):
    rng = np.random.default_rng(5)
    for K, f in ((1, 0), (3, 1), (5, 2)):
        grads = rng.standard_normal((K, 3))
        grads[K - f:] = 100.0  # the last f ranks attack
        counts = rng.integers(1, 4, K)
        want = geometric_median(grads, counts, f, 1e-4, 1e-8, 40)
        res = cluster.run(lambda comm: robust_aggregate(comm, grads[comm.rank], int(counts[comm.rank]), f, 1e-4,
                                                        1e-8, 40), K, backend="sim", timeout=30)
        for r, got in enumerate(res.values):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=f"rank {r}'s aggregate, K={K}")
        if K > 1:
            rounds = res.stats[1].messages_sent - 1
            assert all(s.messages_sent == rounds + 1 for s in res.stats[1:]), "every worker answers every round"
            assert res.stats[0].messages_sent == (K - 1) * (rounds + 1), "rank 0 sends z, and the aggregate, to all"
