"""Chapter 14: DP-SGD (per-example clipping, Gaussian noise) and the RDP accountant, beside Opacus."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from scaleoutai import datasets, nn
from scaleoutai.ml import privacy as pv

SETTINGS = [(0.01, 1.1, 1000, 1e-5), (0.004, 0.8, 5000, 1e-6), (0.1, 2.0, 100, 1e-5), (0.05, 4.0, 50, 1e-5),
            (1.0, 5.0, 10, 1e-5), (0.02, 0.6, 300, 1e-5)]


def _model(dtype=np.float64):
    X, y = datasets.classification(64, 5, classes=3, seed=0, dtype=dtype)
    return nn.mlp_init([5, 7, 3], seed=1, dtype=dtype), X, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_per_example_gradients_sum_to_the_batch_gradient(dtype):
    params, X, y = _model(dtype)
    per = pv.per_example_grads(params, X, y)
    logits, cache = nn.mlp_forward(params, X)
    _, batch = nn.mlp_backward(params, cache, nn.softmax_cross_entropy(logits, y)[1])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for k in params:
        assert per[k].shape == (len(X),) + params[k].shape
        np.testing.assert_allclose(per[k].mean(axis=0), batch[k], atol=tol)
    one = pv.per_example_grads(params, X[3:4], y[3:4])  # example 3 alone
    for k in params:
        np.testing.assert_allclose(per[k][3], one[k][0], atol=tol)


def test_clipping_bounds_every_examples_contribution_by_C():
    params, X, y = _model()
    per = pv.per_example_grads(params, X, y)
    for C in (0.01, 0.5, 100.0):
        clipped, norms = pv.clip_per_example(per, C)
        after = np.sqrt(sum(np.sum(clipped[k].reshape(len(X), -1) ** 2, axis=1) for k in clipped))
        assert np.all(after <= C + 1e-12)
        small = norms < C  # examples already inside the ball keep their gradient (up to Opacus's 1e-6)
        np.testing.assert_allclose(after[small], norms[small], rtol=1e-5)
        assert np.all(after[~small] > C * (1 - 1e-5))
    # one example changed arbitrarily moves the noiseless sum by at most 2C (it is replaced) and C (added)
    X2 = X.copy()
    X2[0] *= 1000.0
    C = 0.5
    s1 = pv.dp_sum(pv.clip_per_example(pv.per_example_grads(params, X, y), C)[0], C, 0.0, np.random.default_rng())
    s2 = pv.dp_sum(pv.clip_per_example(pv.per_example_grads(params, X2, y), C)[0], C, 0.0, np.random.default_rng())
    assert np.sqrt(sum(np.sum((s1[k] - s2[k]) ** 2) for k in s1)) <= 2 * C + 1e-9


def test_noise_has_standard_deviation_sigma_C_over_the_expected_batch():
    params, X, y = _model()
    C, sigma, B = 0.5, 1.3, 32.0
    clean = pv.dp_sgd_gradient(params, X, y, C, 0.0, B, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    noise = np.concatenate([nn.flatten(pv.dp_sgd_gradient(params, X, y, C, sigma, B, rng)) - nn.flatten(clean)
                            for _ in range(200)])
    assert abs(noise.mean()) < 0.01 * sigma * C / B * 10
    assert noise.std() == pytest.approx(sigma * C / B, rel=0.03)


@pytest.mark.parametrize("q,sigma,steps,delta", SETTINGS)
def test_epsilon_equals_opacus_rdp_accountant(q, sigma, steps, delta):
    rdp = pytest.importorskip("opacus.accountants")
    acc = rdp.RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    ours = pv.epsilon(q, sigma, steps, delta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns when the best order sits at an end of the list
        theirs = acc.get_epsilon(delta, alphas=list(pv.ORDERS))
        theirs_default = acc.get_epsilon(delta)  # Opacus also tries fractional orders 1.1 ... 10.9
    assert ours == pytest.approx(theirs, rel=1e-6)
    assert theirs_default <= ours * (1 + 1e-9)  # fractional orders can only tighten the bound
    if ours < 4:  # where DP-SGD is used, integer orders lose little; at large eps the best order is < 2
        assert ours <= 1.02 * theirs_default


def test_epsilon_grows_with_steps_and_falls_with_sigma():
    eps = [[pv.epsilon(0.01, s, T, 1e-5) for T in (100, 1000, 4000)] for s in (0.8, 1.2, 2.0)]
    assert all(np.all(np.diff(row) > 0) for row in eps)
    assert all(np.all(np.diff(col) < 0) for col in np.array(eps).T)
    s = pv.sigma_for_epsilon(2.0, 0.01, 1000, 1e-5)
    assert pv.epsilon(0.01, s, 1000, 1e-5) <= 2.0 < pv.epsilon(0.01, s * 0.999, 1000, 1e-5)


def test_rdp_single_order_matches_the_formula_by_hand():
    q, sigma = 0.1, 1.5  # order 2: log((1-q)^2 + 2q(1-q) + q^2 e^{1/sigma^2})
    want = np.log((1 - q) ** 2 + 2 * q * (1 - q) + q ** 2 * np.exp(1 / sigma ** 2))
    assert pv.rdp_step(q, sigma, 2) == pytest.approx(want, rel=1e-12)
    assert pv.rdp_step(1.0, sigma, 5) == pytest.approx(5 / (2 * sigma ** 2))
    with pytest.raises(ValueError, match="integer orders"):
        pv.rdp_step(q, sigma, 1.5)
    with pytest.raises(ValueError, match="delta"):
        pv.rdp_to_epsilon([2], [0.1], 0.0)


def _torch_mlp(params):
    import torch

    n = len(params) // 2
    layers = []
    for i in range(n):
        lin = torch.nn.Linear(*params[f"W{i}"].shape).double()
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(params[f"W{i}"].T))
            lin.bias.copy_(torch.tensor(params[f"b{i}"]))
        layers += [lin] + ([torch.nn.ReLU()] if i < n - 1 else [])
    return torch.nn.Sequential(*layers)


def test_opacus_clipped_gradient_and_epsilon_equal_ours():
    pytest.importorskip("opacus")
    import torch
    from opacus import PrivacyEngine

    params, X, y = _model()
    C, B = 0.3, 16
    model = _torch_mlp(params)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(X), torch.tensor(y)),
                                         batch_size=B)
    engine = PrivacyEngine(accountant="rdp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                                 noise_multiplier=0.0, max_grad_norm=C, poisson_sampling=False)
    xb, yb = next(iter(loader))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(xb), yb).backward()
    opt.step()
    lin = [m for m in model._module if isinstance(m, torch.nn.Linear)]
    theirs = {}
    for i, m in enumerate(lin):
        theirs[f"W{i}"], theirs[f"b{i}"] = m.weight.grad.numpy().T, m.bias.grad.numpy()
    ours = pv.dp_sgd_gradient(params, xb.numpy(), yb.numpy(), C, 0.0, B, np.random.default_rng(0))
    for k in ours:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=0, atol=1e-12)
    unclipped = pv.per_example_grads(params, xb.numpy(), yb.numpy())
    assert max(np.abs(ours[k] - unclipped[k].mean(axis=0)).max() for k in ours) > 1e-3  # clipping acted
    # Opacus's accountant after 30 steps of rate 1/4 at sigma = 1.0, against ours
    engine.accountant.history = [(1.0, B / len(X), 30)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert engine.accountant.get_epsilon(1e-5, alphas=list(pv.ORDERS)) == pytest.approx(
            pv.epsilon(B / len(X), 1.0, 30, 1e-5), rel=1e-6)


def test_dp_sgd_still_learns_with_moderate_noise():
    X, y = datasets.classification(2000, 10, classes=3, separation=3.0, seed=0)
    params = nn.mlp_init([10, 3], seed=0)
    trained = pv.train_dp_sgd(params, X, y, C=1.0, sigma=1.0, q=0.05, steps=150, lr=0.5, seed=0)
    acc = lambda p: np.mean(np.argmax(nn.mlp_forward(p, X)[0], axis=1) == y)  # noqa: E731
    assert acc(trained) > acc(params) + 0.2 and acc(trained) > 0.8
