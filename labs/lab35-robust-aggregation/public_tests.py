"""Public tests for lab 35: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster


def _expect_value_error(fn, what):
    try:
        fn()
    except ValueError:
        return
    raise AssertionError(f"{what} must raise ValueError")


def run_public_tests(coordinate_median, trimmed_mean, krum, robust_aggregate):
    V = np.array([[1.0, 5.0], [2.0, -1.0], [9.0, 0.0], [3.0, 2.0]])
    np.testing.assert_allclose(coordinate_median(V), [2.5, 1.0], err_msg="median of an even K: mean of the middle two")
    np.testing.assert_allclose(coordinate_median(V[:3]), [2.0, 0.0], err_msg="median of K = 3")
    np.testing.assert_allclose(trimmed_mean(V, 1), [2.5, 1.0], err_msg="trimmed mean, f = 1 of K = 4")
    np.testing.assert_allclose(trimmed_mean(V, 0), V.mean(axis=0), err_msg="trimmed mean with f = 0 is the mean")
    assert coordinate_median(V.astype(np.float32)).dtype == np.float32, "keep the input's dtype"
    print("ok: median and trimmed mean on a hand-made example")

    W = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [50.0, -50.0]])
    np.testing.assert_allclose(krum(W, 1, 1), [0.0, 0.0], err_msg="Krum: all four honest vectors tie; lower index")
    np.testing.assert_allclose(krum(W, 1, 4), [0.5, 0.5], err_msg="multi-Krum with m = K - f leaves the outlier out")
    np.testing.assert_allclose(krum(W, 1, 5), W.mean(axis=0), err_msg="multi-Krum with m = K is the mean")
    _expect_value_error(lambda: trimmed_mean(V, 2), "trimmed_mean with f = 2 of K = 4")
    _expect_value_error(lambda: krum(W[:4], 1, 1), "krum with K = 4, f = 1 (needs K > 2f + 2)")
    print("ok: Krum, multi-Krum and the limits on f")

    rng = np.random.default_rng(5)
    for K, f, rule in ((1, 0, "median"), (4, 1, "trimmed_mean"), (5, 1, "krum"), (7, 2, "multi_krum")):
        grads = rng.standard_normal((K, 3))
        grads[K - f:] = 100.0  # the last f ranks attack
        want = {"median": lambda: coordinate_median(grads), "trimmed_mean": lambda: trimmed_mean(grads, f),
                "krum": lambda: krum(grads, f, 1), "multi_krum": lambda: krum(grads, f, K - f)}[rule]()
        res = cluster.run(lambda comm: robust_aggregate(comm, grads[comm.rank], rule, f), K, timeout=30)
        for r, got in enumerate(res.values):
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"rank {r}'s aggregate, K={K}, {rule}")
        assert res.stats[0].messages_sent == K - 1, "rank 0 sends the aggregate once to every other rank"
        print(f"ok: robust_aggregate, K={K}, {rule}, {f} attacker(s)")
    print("public tests passed; the grader also tries K up to 9, float32, ties, four attacks and 3 processes")
