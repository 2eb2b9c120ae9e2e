"""Every formula Chapter 12 credits to a paper, checked against a hand computation or a library.

1. Chen and Guestrin, "XGBoost", KDD 2016, eq. 7, the split gain
       1/2 [G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda) - (G_L+G_R)^2/(H_L+H_R+lambda)] - gamma
   (``trees.split_gains``): against a loop over the rows, and against the drop of the regularised
   objective (their eq. 2, exact for the squared loss) when a leaf is cut in two.
2. Chen and Guestrin eq. 5, the optimal leaf weight -G/(H+lambda) (the booster's leaf value, shrunk by
   lr): against the minimiser of the leaf's regularised squared loss.
3. The pruning rule "split only when the eq. 7 gain is > 0": gamma = 0 leaves the split choice of the
   bracket unchanged (the 1/2 is a positive factor); gamma > 0 turns the nodes whose bracket is below
   2 gamma into leaves, on K ranks as on one.
4. LightGBM (Ke et al., NeurIPS 2017; version pinned here): ``trees_to_dataframe()["split_gain"]`` is the
   bracket of eq. 7 WITHOUT the 1/2, i.e. 2 (gain + gamma), whatever ``min_gain_to_split`` is, and
   ``min_gain_to_split = 2 gamma`` prunes exactly the splits our gamma prunes (measured, not documented).
5. Boyd, Parikh, Chu, Peleato and Eckstein, "Distributed Optimization and Statistical Learning via the
   ADMM", 2011, Section 7.1.1 (consensus with a regulariser g): the z-update
   argmin_z g(z) + (K rho / 2) ||z - xbar - ubar||^2 = K rho (xbar + ubar) / (lambda + K rho) for
   g = (lambda/2)||.||^2, and the dual residual s = rho sqrt(K) ||z - z_prev|| (their Section 7.1).
6. Nocedal, "Updating quasi-Newton matrices with limited storage", Math. Comp. 1980 (Liu and Nocedal
   1989): the two-loop recursion returns -H_m g with H_m the BFGS inverse update applied to the m stored
   pairs from H_0 = (s.y / y.y) I.

Chapter 12 also uses the ring all-reduce's 2 (K-1)/K m numbers per rank (Chapter 4; checked byte for
byte in tests/test_ml_glm.py and tests/test_ml_classical.py) and Lloyd's k-means step (checked against
scikit-learn's KMeans(algorithm="lloyd") in tests/test_ml_classical.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.collectives import block_range
from scaleoutai.ml import glm
from scaleoutai.ml import trees as tr


def small_problem(n: int = 300, d: int = 3, bins: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, bins, size=(n, d)).astype(float)
    y = X[:, 0] - 2.0 * (X[:, 1] > 3) + rng.standard_normal(n)
    edges = tr.quantile_edges(X, bins)
    binned = tr.bin_data(X, edges)
    g, h = rng.standard_normal(n), rng.uniform(0.2, 1.0, n)
    return X, y, binned, g, h, edges


@pytest.mark.parametrize("lam,gamma", [(1.0, 0.0), (0.3, 2.5)])
def test_split_gain_is_chen_guestrin_eq7_by_hand(lam, gamma):
    _, _, binned, g, h, _ = small_problem()
    hist = tr.histograms(binned, g, h, np.zeros(len(g), dtype=np.int64), 1, 8)
    got = tr.split_gains(hist, lam, min_child_weight=0.0, gamma=gamma)
    for f in range(binned.shape[1]):
        for b in range(7):
            left = binned[:, f] <= b
            GL, HL, GR, HR = g[left].sum(), h[left].sum(), g[~left].sum(), h[~left].sum()
            want = 0.5 * (GL ** 2 / (HL + lam) + GR ** 2 / (HR + lam) - (GL + GR) ** 2 / (HL + HR + lam)) - gamma
            assert got[0, f, b] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_eq7_is_the_drop_of_the_regularised_objective_and_eq5_its_minimiser():
    """Squared loss (yhat - y)^2 / 2: g = yhat - y, h = 1, and the second-order expansion is exact."""
    rng = np.random.default_rng(1)
    lam, gamma = 0.7, 0.4
    y, yhat = rng.standard_normal(40), rng.standard_normal(40)
    left = rng.random(40) < 0.4

    def leaf(rows):  # min over w of sum (yhat + w - y)^2 / 2 + lam w^2 / 2, by brute force on a fine grid
        grid = np.linspace(-5, 5, 200_001)
        obj = ((yhat[rows, None] + grid - y[rows, None]) ** 2).sum(0) / 2 + lam * grid ** 2 / 2
        return obj.min(), grid[obj.argmin()]

    (parent, w_parent), (lo, _), (ro, _) = leaf(np.ones(40, bool)), leaf(left), leaf(~left)
    G, H = (yhat - y).sum(), 40.0
    assert w_parent == pytest.approx(-G / (H + lam), abs=1e-4)  # eq. 5
    drop = parent + gamma * 1 - (lo + ro + gamma * 2)  # one leaf -> two leaves: gamma T grows by gamma
    g = yhat - y
    hist = np.zeros((1, 1, 2, 2))
    hist[0, 0, 0] = g[left].sum(), left.sum()
    hist[0, 0, 1] = g[~left].sum(), (~left).sum()
    assert tr.split_gains(hist, lam, 0.0, gamma)[0, 0, 0] == pytest.approx(drop, abs=1e-6)
    leaf_value = tr.reference_booster(np.zeros((40, 1)), y, rounds=1, depth=1, lam=lam, lr=1.0)["trees"][0]["value"][0]
    assert leaf_value == pytest.approx(-(y.mean() - y).sum() / (40 + lam), abs=1e-12)  # lr = 1: eq. 5 exactly


def test_gamma_zero_keeps_the_split_choice_and_gamma_prunes_on_K_ranks_as_on_one():
    X, y, binned, g, h, edges = small_problem(n=400)
    hist = tr.histograms(binned, g, h, np.zeros(len(g), dtype=np.int64), 1, 8)
    c = hist.cumsum(axis=2)
    GL, HL, G, H = c[0, :, :-1, 0], c[0, :, :-1, 1], c[0, :, -1:, 0], c[0, :, -1:, 1]
    bracket = GL ** 2 / (HL + 1) + (G - GL) ** 2 / (H - HL + 1) - G ** 2 / (H + 1)
    gain, f, b = tr.best_split(hist, 1.0, 0.0)[0]
    assert (f, b) == np.unravel_index(bracket.argmax(), bracket.shape) and gain == pytest.approx(bracket.max() / 2)
    plain = tr.reference_booster(X, y, rounds=2, depth=3, bins=8, lam=1.0)
    gains = plain["trees"][0]["gain"]
    inner = np.sort(gains[plain["trees"][0]["feature"] >= 0])
    gamma = float(inner[:2].mean())  # between the two weakest splits of the first tree
    pruned = tr.reference_booster(X, y, rounds=2, depth=3, bins=8, lam=1.0, gamma=gamma)
    t0 = pruned["trees"][0]
    assert (t0["feature"] >= 0).sum() < (plain["trees"][0]["feature"] >= 0).sum()
    assert (t0["gain"][t0["feature"] >= 0] > 0).all()  # every kept split gains more than gamma ...
    np.testing.assert_allclose(t0["gain"][0], gains[0] - gamma, rtol=1e-12)  # ... by exactly its eq. 7 gain

    def shard(comm):
        lo, hi = block_range(len(X), comm.size, comm.rank)
        return tr.train_booster(comm, X[lo:hi], y[lo:hi], rounds=2, depth=3, bins=8, lam=1.0, edges=edges,
                                gamma=gamma)

    for model in cluster.run(shard, 3).values:
        for t, rt in zip(model["trees"], tr.reference_booster(X, y, rounds=2, depth=3, lam=1.0, edges=edges,
                                                               gamma=gamma)["trees"]):
            assert np.array_equal(t["feature"], rt["feature"]) and np.array_equal(t["bin"], rt["bin"])


@pytest.mark.slow  # importing LightGBM and pandas takes most of ~10 s on 2 cores
def test_lightgbm_split_gain_is_the_bracket_without_the_half_and_min_gain_to_split_is_2_gamma():
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    n = 2000
    X = rng.integers(0, 16, size=(n, 4)).astype(float)
    y = 0.5 * X[:, 1] - 3.0 * (X[:, 2] > 7) + 0.5 * rng.standard_normal(n)
    base = dict(objective="regression", num_leaves=4, max_depth=2, learning_rate=0.5, min_data_in_leaf=1,
                min_sum_hessian_in_leaf=0.0, lambda_l2=1.0, max_bin=63, verbose=-1, num_threads=1, seed=0)
    ours = tr.reference_booster(X, y, rounds=1, depth=2, bins=63, lam=1.0, lr=0.5)["trees"][0]
    ours_gains = sorted(ours["gain"][ours["feature"] >= 0])
    assert len(ours_gains) == 3
    gamma = float(np.mean(ours_gains[:2]))  # prunes our weakest split only
    for mg, g_ours in ((0.0, 0.0), (2 * gamma, gamma)):
        df = lgb.train(dict(base, min_gain_to_split=mg), lgb.Dataset(X, y), num_boost_round=1).trees_to_dataframe()
        lgb_gains = sorted(df["split_gain"].dropna())
        tree = tr.reference_booster(X, y, rounds=1, depth=2, bins=63, lam=1.0, lr=0.5, gamma=g_ours)["trees"][0]
        mine = sorted(tree["gain"][tree["feature"] >= 0])
        assert len(lgb_gains) == len(mine) == (3 if mg == 0 else 2)  # min_gain_to_split = 2 gamma prunes the same
        # LightGBM stores float32: its gain is 2 (eq. 7 gain + gamma), not changed by min_gain_to_split
        np.testing.assert_allclose(lgb_gains, 2 * (np.array(mine) + g_ours), rtol=1e-5)


def test_admm_z_update_and_dual_residual_are_boyd_section_7():
    from scipy.optimize import minimize

    rng = np.random.default_rng(3)
    K, d, lam, rho = 5, 4, 0.3, 0.7
    xs, us = rng.standard_normal((K, d)), rng.standard_normal((K, d))
    closed = K * rho * (xs.mean(0) + us.mean(0)) / (lam + K * rho)
    numeric = minimize(lambda z: lam / 2 * z @ z + K * rho / 2 * np.sum((z - xs.mean(0) - us.mean(0)) ** 2),
                       np.zeros(d), method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(closed, numeric, atol=1e-7)
    # the same z minimises sum_k (rho/2)||x_k - z + u_k||^2 + g(z) (Boyd (7.6) before averaging)
    numeric2 = minimize(lambda z: lam / 2 * z @ z + rho / 2 * np.sum((xs - z + us) ** 2), np.zeros(d),
                        method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(closed, numeric2, atol=1e-7)
    Xd = rng.standard_normal((60, d))
    yd = np.where(rng.random(60) < 0.5, 1.0, -1.0)

    def run(comm):
        lo, hi = block_range(60, comm.size, comm.rank)
        return glm.train_admm(comm, Xd[lo:hi], yd[lo:hi], lam, rho=rho, iters=6)

    res = cluster.run(run, K).values[0]
    zs = np.vstack([np.zeros(d), res["z_history"]])
    # s stacks rho (z - z_prev) once per rank: its norm is rho sqrt(K) ||z - z_prev||
    np.testing.assert_allclose(res["dual_residual"], [rho * np.linalg.norm(np.tile(b - a, K)) for a, b in zip(zs, zs[1:])],
                               rtol=1e-12)


def test_two_loop_recursion_is_the_bfgs_inverse_update():
    rng = np.random.default_rng(4)
    d, m = 6, 4
    A = rng.standard_normal((d, d))
    A = A @ A.T + d * np.eye(d)  # a convex quadratic: y = A s, so s.y > 0
    S = [rng.standard_normal(d) for _ in range(m)]
    Y = [A @ s for s in S]
    g = rng.standard_normal(d)
    Hm = (S[-1] @ Y[-1]) / (Y[-1] @ Y[-1]) * np.eye(d)
    for s, yv in zip(S, Y):  # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T (Nocedal and Wright, eq. 6.17)
        r = 1.0 / (yv @ s)
        V = np.eye(d) - r * np.outer(yv, s)
        Hm = V.T @ Hm @ V + r * np.outer(s, s)
    np.testing.assert_allclose(glm.two_loop(g, S, Y), -Hm @ g, rtol=1e-10, atol=1e-12)
    assert np.array_equal(glm.two_loop(g, [], []), -g)  # no history: steepest descent
