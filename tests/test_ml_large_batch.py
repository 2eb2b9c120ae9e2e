"""Chapter 10: large-batch training. Linear scaling, warm-up, LARS and LAMB against a hand-derived step
and against a few-line torch implementation of each (torch has no LARS; LAMB is written out too)."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.ml import large_batch as lb
from scaleoutai.ml import optimization as opt

SHAPES = ((3, 4), (4,), (4, 2), (2,))  # a 2-layer MLP's pieces: 26 values


def test_linear_scaling_rule_and_warmup_schedule():
    assert lb.linear_scaled_lr(0.1, 256, 8192) == pytest.approx(3.2)  # Goyal et al.'s ResNet-50 numbers
    sched = [lb.warmup_lr(t, 3.2, 4, start_lr=0.1) for t in range(7)]
    assert sched == pytest.approx([0.1, 0.875, 1.65, 2.425, 3.2, 3.2, 3.2])
    assert lb.warmup_lr(0, 1.0, 0) == 1.0  # no warm-up
    with pytest.raises(ValueError, match="batch"):
        lb.linear_scaled_lr(0.1, 0, 8)


def test_lars_single_step_matches_the_hand_derivation():
    # one layer w = (3, 4), ||w|| = 5; g = (0.6, 0.8), ||g|| = 1; trust 0.001, no momentum, no decay:
    # lam = 0.001 * 5 / 1 = 0.005, v = lr lam g = 0.005 g, w - v = (3 - 0.003, 4 - 0.004)
    w, g = np.array([3.0, 4.0]), np.array([0.6, 0.8])
    new = lb.lars_step(w, g, [(2,)], {}, lr=1.0, trust=0.001, momentum=0.0)
    np.testing.assert_allclose(new, [2.997, 3.996], rtol=0, atol=1e-15)
    # with weight decay 0.5: lam = 0.001 * 5 / (1 + 2.5) and the step is lam (g + 0.5 w)
    new = lb.lars_step(w, g, [(2,)], {}, lr=1.0, trust=0.001, momentum=0.0, weight_decay=0.5)
    np.testing.assert_allclose(new, w - 0.001 * 5 / 3.5 * (g + 0.5 * w), rtol=0, atol=1e-15)


def test_lamb_single_step_matches_the_hand_derivation():
    # first step: m_hat = g, v_hat = g^2, so r = g / (|g| + eps) = (1, 1) up to eps; ||r|| = sqrt(2);
    # the trust ratio is ||w|| / ||r|| = 5 / sqrt(2), so w <- w - lr (5 / sqrt 2) (1, 1)
    w, g = np.array([3.0, 4.0]), np.array([0.6, 0.8])
    new = lb.lamb_step(w, g, [(2,)], {}, lr=0.01, eps=0.0)
    np.testing.assert_allclose(new, w - 0.01 * 5 / np.sqrt(2), rtol=0, atol=1e-15)
    # two layers scale independently: layer 2 with ||w|| = 1 moves 5 times less than layer 1
    w2 = np.array([3.0, 4.0, 0.6, 0.8])
    new = lb.lamb_step(w2, np.ones(4), [(2,), (2,)], {}, lr=0.01, eps=0.0)
    np.testing.assert_allclose(w2 - new, [0.05 / np.sqrt(2)] * 2 + [0.01 / np.sqrt(2)] * 2, rtol=1e-14)


def test_a_zero_layer_gets_trust_ratio_one():
    assert lb.trust_ratio(0.0, 2.0) == 1.0 and lb.trust_ratio(2.0, 0.0) == 1.0 and lb.trust_ratio(2.0, 4.0) == 0.5
    w, g = np.zeros(6), np.ones(6)
    np.testing.assert_allclose(lb.lamb_step(w, g, [(6,)], {}, lr=0.1, eps=0.0), -0.1 * np.ones(6))


def _torch_lars(params, grads_seq, lr, trust, momentum, wd):
    import torch

    ps = [torch.tensor(p) for p in params]
    vs = [torch.zeros_like(p) for p in ps]
    for grads in grads_seq:
        for p, v, g in zip(ps, vs, (torch.tensor(x) for x in grads)):
            wn, gn = p.norm(), g.norm()
            lam = trust * (wn / (gn + wd * wn) if wn > 0 and gn > 0 else 1.0)
            v.mul_(momentum).add_(lam * lr * (g + wd * p))
            p.sub_(v)
    return [p.numpy() for p in ps]


def _torch_lamb(params, grads_seq, lr, betas, eps, wd):
    import torch

    ps = [torch.tensor(p) for p in params]
    ms, vs = [torch.zeros_like(p) for p in ps], [torch.zeros_like(p) for p in ps]
    for t, grads in enumerate(grads_seq, 1):
        for p, m, v, g in zip(ps, ms, vs, (torch.tensor(x) for x in grads)):
            m.mul_(betas[0]).add_((1 - betas[0]) * g)
            v.mul_(betas[1]).add_((1 - betas[1]) * g * g)
            u = (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)).sqrt() + eps) + wd * p
            wn, un = p.norm(), u.norm()
            p.sub_(lr * (wn / un if wn > 0 and un > 0 else 1.0) * u)
    return [p.numpy() for p in ps]


def _pieces(flat, shapes):
    return [flat[s].reshape(sh) for s, sh in zip(lb.layer_slices(shapes, flat.size), shapes)]


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("shapes", [SHAPES, ((5,),), ((8, 16), (16,), (16, 3), (3,))])
@pytest.mark.parametrize("method", ["lars", "lamb"])
def test_lars_and_lamb_equal_a_torch_implementation_over_several_steps(method, shapes, dtype, tol):
    rng = np.random.default_rng(len(shapes))
    n = sum(int(np.prod(sh)) for sh in shapes)
    w0 = rng.standard_normal(n).astype(dtype)
    w0[lb.layer_slices(shapes)[-1]] = 0  # a layer at zero (a bias at init): trust ratio 1
    grads = [rng.standard_normal(n).astype(dtype) for _ in range(4)]
    w, state = w0.copy(), {}
    for g in grads:
        if method == "lars":
            w = lb.lars_step(w, g, shapes, state, lr=0.5, trust=0.01, momentum=0.9, weight_decay=1e-3)
        else:
            w = lb.lamb_step(w, g, shapes, state, lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    assert w.dtype == dtype
    seq = [_pieces(g, shapes) for g in grads]
    ref = (_torch_lars(_pieces(w0, shapes), seq, 0.5, 0.01, 0.9, 1e-3) if method == "lars"
           else _torch_lamb(_pieces(w0, shapes), seq, 0.01, (0.9, 0.999), 1e-6, 0.01))
    np.testing.assert_allclose(w, np.concatenate([r.ravel() for r in ref]), rtol=tol, atol=tol)
    assert not np.allclose(w, w0)


def test_train_large_batch_with_sgd_is_reference_sgd():
    X, y = datasets.classification(120, 5, classes=3, seed=1)
    mlp = opt.mlp_model([5, 8, 3])
    w0 = mlp.init(seed=1)
    for batch in (16, None):
        w, losses = lb.train_large_batch(X, y, mlp, w0, 12, batch, "sgd", 0.1, seed=3, every=4)
        ref, _ = opt.reference_sgd(X, y, mlp, w0, 12, 0.1, batch=batch, seed=3)
        np.testing.assert_allclose(w, ref, rtol=0, atol=1e-14)
        assert len(losses) == 12 // 4 + 1 and losses[0] == pytest.approx(mlp.loss(w0, X, y))
    with pytest.raises(ValueError, match="method"):
        lb.train_large_batch(X, y, mlp, w0, 1, 8, "adam", 0.1)


def test_warmup_with_linear_scaling_and_lamb_keep_the_small_batch_loss_where_plain_scaling_lags():
    X, y = datasets.classification(2048, 10, classes=4, separation=2.5, seed=0)
    mlp = opt.mlp_model([10, 32, 4])
    w0 = mlp.init(seed=0)
    b, K, lr, epochs = 8, 64, 0.05, 4
    B = K * b
    per_epoch = len(y) // B
    _, small = lb.train_large_batch(X, y, mlp, w0, epochs * len(y) // b, b, "sgd", lr, every=len(y) // b)
    big_lr = lb.linear_scaled_lr(lr, b, B)
    _, plain = lb.train_large_batch(X, y, mlp, w0, epochs * per_epoch, B, "sgd", big_lr)
    _, warm = lb.train_large_batch(X, y, mlp, w0, epochs * per_epoch, B, "sgd", big_lr, warmup_steps=per_epoch,
                                   start_lr=lr)
    _, lamb = lb.train_large_batch(X, y, mlp, w0, epochs * per_epoch, B, "lamb", 0.05, warmup_steps=per_epoch)
    assert warm[-1] < 1.1 * small[-1] and lamb[-1] < 1.1 * small[-1]
    assert plain[-1] > 1.3 * small[-1]
