"""Chapter 10: top-k, QSGD and PowerSGD with and without error feedback; bytes against the formulas;
torch DDP's PowerSGD hook beside ours on 2 processes."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.ml import compression as cp
from scaleoutai.ml import optimization as opt

COMPRESSORS = [cp.Dense(), cp.TopK(3), cp.TopK(3, True), cp.QSGD(4), cp.QSGD(4, True), cp.QSGD(300)]
SHAPES = ((6, 4), (4,), (3, 5))  # 43 values: two matrices and a bias


def _steps(comm, grads, compressor, steps):
    state: dict = {}
    return [cp.compressed_allreduce(comm, grads[s][comm.rank], compressor, state) for s in range(steps)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("compressor", COMPRESSORS, ids=lambda c: f"{type(c).__name__}{'+EF' if c.error_feedback else ''}")
def test_compressed_allreduce_equals_reference_and_bytes_match_formula(compressor, K, dtype):
    n, steps = 27, 3
    rng = np.random.default_rng(K)
    grads = [[rng.standard_normal(n).astype(dtype) for _ in range(K)] for _ in range(steps)]
    res = cluster.run(_steps, K, args=(grads, compressor, steps))
    states = [{} for _ in range(K)]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for s in range(steps):
        ref = cp.reference_compressed_allreduce(grads[s], compressor, states)
        for r in range(K):
            assert res.values[r][s].dtype == dtype
            np.testing.assert_allclose(res.values[r][s], ref, rtol=tol, atol=tol)
    itemsize = np.dtype(dtype).itemsize
    assert [st.bytes_sent for st in res.stats] == [steps * cp.step_bytes(compressor, n, K, r, itemsize)
                                                  for r in range(K)]


def test_more_ranks_than_entries_and_k_larger_than_n():
    rng = np.random.default_rng(0)
    grads = [[rng.standard_normal(3) for _ in range(8)]]
    res = cluster.run(_steps, 8, args=(grads, cp.TopK(5), 1))
    np.testing.assert_allclose(res.values[3][0], np.mean(grads[0], axis=0), rtol=1e-12)  # k >= n: exact
    res = cluster.run(_steps, 8, args=(grads, cp.Dense(), 1))
    np.testing.assert_allclose(res.values[7][0], np.mean(grads[0], axis=0), rtol=1e-12)


def test_topk_bytes_are_k_pairs_of_index_and_value():
    assert cp.step_bytes(cp.TopK(10), 1000, 2, 0, 4) == 10 * (4 + 4)
    assert cp.step_bytes(cp.TopK(10), 1000, 5, 0, 8) == 4 * 10 * (4 + 8)
    assert cp.step_bytes(cp.QSGD(4), 1000, 2, 0, 4) == 4 + 1000
    assert cp.qsgd_paper_bits(1000, 4) == 32 + 1000 * 4


def test_topk_picks_largest_magnitude_and_breaks_ties_by_index():
    idx, vals = cp.topk_compress(np.array([0.5, -3.0, 2.0, -2.0, 0.1]), 3)
    assert idx.dtype == np.int32 and idx.tolist() == [1, 2, 3] and vals.tolist() == [-3.0, 2.0, -2.0]
    idx, _ = cp.topk_compress(np.array([1.0, -1.0, 1.0]), 2)
    assert idx.tolist() == [0, 1]


def test_qsgd_is_unbiased_within_a_statistical_tolerance():
    rng = np.random.default_rng(5)
    v = rng.standard_normal(20)
    trials = 20_000
    Q = np.array([cp.qsgd_dequantize(*cp.qsgd_quantize(v, 2, rng), 2) for _ in range(trials)])
    # each entry's mean within 5 standard errors (the variance per entry is at most (||v||/s)^2 / 4)
    se = np.linalg.norm(v) / 2 / 2 / np.sqrt(trials)
    assert np.abs(Q.mean(axis=0) - v).max() < 5 * se
    assert np.abs(Q[0]).max() > 0 and not np.allclose(Q[0], v)  # one draw is not v itself
    levels = cp.qsgd_quantize(v, 2, rng)[1]
    assert levels.dtype == np.int8 and np.abs(levels).max() <= 2


def test_error_feedback_residual_is_what_compression_dropped():
    g = np.array([3.0, -1.0, 0.5, 2.0])
    res = cluster.run(lambda comm: (lambda st: (cp.compressed_allreduce(comm, g, cp.TopK(1, True), st), st))({}), 1)
    avg, state = res.values[0]
    assert avg.tolist() == [3.0, 0.0, 0.0, 0.0]
    assert state["residual"].tolist() == [0.0, -1.0, 0.5, 2.0]


def _run_psgd(comm, grads, compressor, steps):
    return _steps(comm, grads, compressor, steps)


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_powersgd_at_full_rank_equals_dense_allreduce(K):
    rng = np.random.default_rng(K)
    grads = [[rng.standard_normal(43) for _ in range(K)] for _ in range(3)]
    res = cluster.run(_run_psgd, K, args=(grads, cp.PowerSGD(4, SHAPES, error_feedback=True), 3))
    for s in range(3):
        for r in range(K):
            np.testing.assert_allclose(res.values[r][s], np.mean(grads[s], axis=0), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("K", [2, 3])
def test_powersgd_low_rank_is_the_projection_P_P_T_of_the_mean(K):
    """Rank r < full: every rank gets P P^T mean(M) with P spanning (sum M_k) Q, bytes = ring(P) + ring(Q) + bias."""
    rng = np.random.default_rng(0)
    grads = [[rng.standard_normal(43) for _ in range(K)]]
    comp = cp.PowerSGD(1, SHAPES)
    res = cluster.run(_run_psgd, K, args=(grads, comp, 1))
    mean = np.mean(grads[0], axis=0)
    Q0 = np.random.default_rng(comp.seed)
    qs = [Q0.standard_normal((4, 1)), Q0.standard_normal((5, 1))]
    expect = mean.copy()
    for (off, (n, m)), q in zip([(0, (6, 4)), (28, (3, 5))], qs):
        M = mean[off:off + n * m].reshape(n, m)
        P = cp.orthogonalize(M @ cp.orthogonalize(q))
        expect[off:off + n * m] = (P @ P.T @ M).ravel()
    for r in range(K):
        np.testing.assert_allclose(res.values[r][0], expect, rtol=1e-10, atol=1e-12)
    assert np.abs(res.values[0][0] - mean).max() > 0.1  # rank 1 loses information
    assert [s.bytes_sent for s in res.stats] == [cp.step_bytes(comp, 43, K, r, 8) for r in range(K)]
    assert cp.step_bytes(comp, 43, 2, 0, 8) == 8 * ((6 + 3) + (4 + 5) + 4)  # K = 2: half of each of P, Q, bias twice


def _heterogeneous():
    X, y = opt.heterogeneous_regression(4, 50, 50, seed=10)
    return X, y, opt.linear_model(50)


def test_topk_without_error_feedback_stalls_and_error_feedback_reaches_dense_loss():
    """The known result (Karimireddy et al. 2019): shards that disagree, k = 10% of d, 300 full-batch steps.
    Stated factors: EF within 1.05x of the dense loss; plain top-k stays above 1.2x."""
    X, y, model = _heterogeneous()
    w0 = model.init()
    loss = {}
    for name, comp in [("dense", cp.Dense()), ("topk", cp.TopK(5)), ("topk+ef", cp.TopK(5, True))]:
        res = cluster.run(cp.train_compressed_sgd, 4, args=(X, y, model, w0, 300, 0.02, comp))
        loss[name] = model.loss(res.values[0][0], X, y)
        if name != "dense":
            ref, _ = cp.reference_compressed_sgd(X, y, model, w0, 300, 0.02, comp, 4)
            np.testing.assert_allclose(res.values[0][0], ref, rtol=1e-9, atol=1e-9)
    assert loss["topk+ef"] < 1.05 * loss["dense"]
    assert loss["topk"] > 1.2 * loss["dense"]


def test_error_feedback_with_unbiased_qsgd_needs_a_contraction():
    """EF adds back what C dropped; QSGD with s^2 < sqrt(n) levels is no contraction and EF then diverges,
    while s = 16 (s > sqrt(50)) stays within 1.1x of the dense loss."""
    X, y, model = _heterogeneous()
    w0 = model.init()
    final = {}
    for s in (2, 16):
        res = cluster.run(cp.train_compressed_sgd, 4, args=(X, y, model, w0, 150, 0.02, cp.QSGD(s, True)))
        final[s] = model.loss(res.values[0][0], X, y)
    dense = cluster.run(cp.train_compressed_sgd, 4, args=(X, y, model, w0, 150, 0.02, cp.Dense())).values[0][0]
    assert not final[2] < 100 * model.loss(w0, X, y)
    assert final[16] < 1.1 * model.loss(dense, X, y)


def test_bad_input_gets_a_readable_error():
    with pytest.raises(ValueError, match="flat vector"):
        cp.topk_compress(np.zeros((2, 2)), 1)
    with pytest.raises(ValueError, match="levels"):
        cp.qsgd_quantize(np.ones(3), 0, np.random.default_rng())
    with pytest.raises(cluster.RankError, match="shapes hold"):
        cluster.run(lambda comm: cp.compressed_allreduce(comm, np.ones(5), cp.PowerSGD(1, ((2, 2),)), {}), 1)
    with pytest.raises(cluster.RankError, match="flat float"):
        cluster.run(lambda comm: cp.compressed_allreduce(comm, [1.0], cp.Dense(), {}), 1)


# --- torch DDP with the PowerSGD communication hook, beside ours --------------------------------------

def _torch_powersgd(comm, X, Y, W0, b0, r, steps, lr, ef):
    """DDP + powerSGD_hook and our compressed_allreduce on the same 2 processes, step by step.

    torch draws its first Q as torch.manual_seed(RandomState(random_seed).randint(1e9)); randn(m, r): we
    hand ours that same Q, and with warm start both reuse the previous Q afterwards. min_compression_rate=1
    keeps the bias (a 4 x 1 matrix to torch) dense, as ours does, so it draws no Q of its own."""
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    from torch.nn.parallel import DistributedDataParallel as DDP

    def linear():
        lin = torch.nn.Linear(W0.shape[1], W0.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W0))
            lin.bias.copy_(torch.from_numpy(b0))
        return lin

    K, rank = comm.size, comm.rank
    x, yt = (torch.from_numpy(np.array_split(a, K)[rank]) for a in (X, Y))
    ddp, twin = DDP(linear()), linear()
    state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=r, start_powerSGD_iter=2,
                             min_compression_rate=1, use_error_feedback=ef, warm_start=True, random_seed=0)
    ddp.register_comm_hook(state, ps.powerSGD_hook)
    seed = np.random.RandomState(0).randint(1_000_000_000)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        q0 = torch.randn(1, W0.shape[1], r, dtype=torch.float64)[0].numpy()
    ours = cp.PowerSGD(r, (W0.shape, b0.shape), error_feedback=ef, warm_start=True)
    our_state: dict = {"q": [q0]}
    diffs, dense_gap = [], []
    for step in range(steps):
        for model in (ddp, twin):
            model.zero_grad()
            torch.nn.functional.mse_loss(model(x), yt).backward()
        local = np.concatenate([twin.weight.grad.numpy().ravel(), twin.bias.grad.numpy()])
        dense = cp.compressed_allreduce(comm, local, cp.Dense(), {})
        mine = dense if step < 2 else cp.compressed_allreduce(comm, local, ours, our_state)
        theirs = np.concatenate([ddp.module.weight.grad.numpy().ravel(), ddp.module.bias.grad.numpy()])
        diffs.append(float(np.abs(mine - theirs).max()))
        dense_gap.append(float(np.abs(theirs - dense).max()))
        with torch.no_grad():
            for p_ddp, p_twin, g in ((ddp.module.weight, twin.weight, mine[:W0.size].reshape(W0.shape)),
                                     (ddp.module.bias, twin.bias, mine[W0.size:])):
                p_ddp -= lr * p_ddp.grad
                p_twin -= lr * torch.from_numpy(g)
    return {"diffs": diffs, "dense_gap": dense_gap, "iter": state.iter,
            "weights_gap": float((ddp.module.weight - twin.weight).detach().abs().max())}


@pytest.mark.slow
@pytest.mark.parametrize("ef", [True, False])
def test_our_powersgd_equals_torch_ddp_powersgd_hook_on_2_processes(ef):
    rng = np.random.default_rng(7)
    X, W0 = rng.standard_normal((16, 8)), 0.3 * rng.standard_normal((4, 8))
    Y, b0 = X @ rng.standard_normal((8, 4)) + 0.1 * rng.standard_normal((16, 4)), np.zeros(4)
    res = cluster.run(_torch_powersgd, 2, backend="process", args=(X, Y, W0, b0, 1, 6, 0.1, ef), timeout=180)
    for out in res.values:
        assert out["iter"] == 6  # torch's hook ran every step (2 dense, then PowerSGD)
        assert max(out["diffs"]) < 1e-12, out["diffs"]
        assert max(out["dense_gap"][:2]) < 1e-12 and min(out["dense_gap"][2:]) > 1e-3  # rank 1 compressed
        assert out["weights_gap"] < 1e-12
