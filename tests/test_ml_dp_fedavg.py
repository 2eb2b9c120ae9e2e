"""Chapter 14: DP-FedAvg (client-level DP): FedAvg when the noise is off, bounded clients, the stated noise, epsilon."""
from __future__ import annotations

import importlib.util
import math
import pathlib
import warnings

import numpy as np
import pytest

from scaleoutai import datasets, nn
from scaleoutai.ml import dp_fedavg as dp
from scaleoutai.ml import federated as fd
from scaleoutai.ml import privacy as pv

LIKE = nn.mlp_init([20, 16, 10], seed=0)
W0 = nn.flatten(LIKE)
LOCAL = dict(epochs=1, lr=0.1, batch_size=32, seed=0)


def _shards(clients, n=1200, alpha=1.0, seed=0):
    X, y = datasets.classification(n, 20, classes=10, separation=3.0, seed=seed)
    return [(X[p], y[p]) for p in fd.dirichlet_split(y, clients, alpha, seed=seed + 1)]


@pytest.mark.parametrize("clients,rounds", [(1, 2), (4, 3), (7, 2)])
def test_no_noise_no_clipping_all_clients_is_fedavg_with_the_fixed_denominator(clients, rounds):
    shards = _shards(clients)
    got, hist = dp.reference_dp_fedavg(W0, LIKE, shards, rounds, q=1.0, C=math.inf, sigma=0.0, **LOCAL)
    w = W0.copy()
    for t in range(rounds):  # FedAvg with every client weighted 1 and the denominator N
        deltas = [fd.client_update(w, LIKE, Xk, yk, 1, 0.1, 32, [0, t, k, 3]) - w for k, (Xk, yk) in enumerate(shards)]
        total = np.zeros(w.size)
        for d in deltas:
            total += d
        w = w + total / clients
    np.testing.assert_array_equal(got, w)
    assert all(h["sampled"] == list(range(clients)) for h in hist)
    if clients > 1:  # equal client sizes: the same as the library's sample-weighted FedAvg, to rounding
        X, y = datasets.classification(clients * 100, 20, classes=10, separation=3.0, seed=5)
        even = [(X[k::clients], y[k::clients]) for k in range(clients)]
        ours, _ = dp.reference_dp_fedavg(W0, LIKE, even, rounds, q=1.0, C=math.inf, sigma=0.0, **LOCAL)
        theirs, _ = fd.reference_fedavg(W0, LIKE, even, rounds, **LOCAL)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("K", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("q,C,sigma", [(1.0, math.inf, 0.0), (0.5, 0.5, 1.0), (0.3, 2.0, 0.7)])
def test_the_communicator_version_equals_the_reference_on_every_K(K, q, C, sigma):
    shards = _shards(6)
    want, want_hist = dp.reference_dp_fedavg(W0, LIKE, shards, 3, q=q, C=C, sigma=sigma, **LOCAL)
    got, hist, res = dp.run_dp_fedavg(W0, LIKE, shards, K, rounds=3, q=q, C=C, sigma=sigma, **LOCAL)
    np.testing.assert_array_equal(got, want)
    assert hist == want_hist


@pytest.mark.parametrize("C,q,clients", [(0.1, 1.0, 5), (1.0, 0.5, 8), (0.3, 0.25, 12)])
def test_clipping_bounds_what_one_client_can_move_the_aggregate(C, q, clients):
    shards = _shards(clients)
    X0, y0 = shards[0]
    huge = [(X0 * 1e3, y0)] + shards[1:]  # client 0's delta is enormous
    absent = [(X0[:0], y0[:0])] + shards[1:]  # client 0 contributes nothing (an empty client)
    a, hist = dp.reference_dp_fedavg(W0, LIKE, huge, 1, q=q, C=C, sigma=0.0, **LOCAL)
    b, _ = dp.reference_dp_fedavg(W0, LIKE, absent, 1, q=q, C=C, sigma=0.0, **LOCAL)
    raw = fd.client_update(W0, LIKE, X0 * 1e3, y0, 1, 0.1, 32, [0, 0, 0, 3]) - W0
    if 0 in hist[0]["sampled"]:
        assert np.linalg.norm(raw) > 100 * C  # it would have moved the model far without the clip
        assert np.linalg.norm(a - b) == pytest.approx(C / (q * clients), rel=1e-5)
    assert np.linalg.norm(a - b) <= C / (q * clients) * (1 + 1e-12)
    assert np.linalg.norm(dp.clip_update(raw, C)) <= C


@pytest.mark.parametrize("sigma,C,q,clients", [(1.0, 0.5, 1.0, 4), (0.7, 2.0, 0.5, 10)])
def test_the_noise_has_variance_sigma_C_over_qN_squared(sigma, C, q, clients):
    shards = _shards(clients)
    rounds, P = 6, W0.size
    # lr = 0: every client's delta is 0, so w_{t+1} - w_t is the noise alone, divided by q N
    w, _ = dp.reference_dp_fedavg(W0, LIKE, shards, 0, q=q, C=C, sigma=sigma, **LOCAL)
    steps = []
    for T in range(1, rounds + 1):
        wT, _ = dp.reference_dp_fedavg(W0, LIKE, shards, T, q=q, C=C, sigma=sigma, epochs=1, lr=0.0,
                                       batch_size=32, seed=0)
        steps.append(wT - w)
        w = wT
    noise = np.concatenate(steps)
    n, s = noise.size, sigma * C / (q * clients)
    assert abs(noise.mean()) < 5 * s / math.sqrt(n)  # 5 standard errors of the mean
    # the sample variance of n normals has relative standard error sqrt(2 / (n - 1)): allow 5 of them
    assert abs(noise.var(ddof=1) / s ** 2 - 1) < 5 * math.sqrt(2 / (n - 1))
    assert abs(noise.var(ddof=1) / s ** 2 - 1) < 0.1  # and the tolerance is a tight one at this n


def test_client_sampling_is_poisson_at_rate_q():
    N, q, T = 50, 0.2, 400
    counts = np.array([len(dp.sample_clients(N, q, t, 0)) for t in range(T)])
    assert abs(counts.mean() - q * N) < 5 * math.sqrt(q * (1 - q) * N / T)
    assert counts.var() == pytest.approx(q * (1 - q) * N, rel=0.3)
    with pytest.raises(ValueError, match="q must be in"):
        dp.sample_clients(N, 0.0, 0, 0)
    with pytest.raises(ValueError, match="finite clipping norm"):
        dp.reference_dp_fedavg(W0, LIKE, _shards(2), 1, q=1.0, C=math.inf, sigma=1.0, **LOCAL)


def test_client_epsilon_falls_with_sigma_and_grows_with_rounds():
    q, delta = 0.1, 1e-5
    by_sigma = [pv.epsilon(q, s, 100, delta) for s in (0.8, 1.0, 1.5, 3.0)]
    by_rounds = [pv.epsilon(q, 1.0, T, delta) for T in (10, 100, 500, 2000)]
    assert all(a > b for a, b in zip(by_sigma, by_sigma[1:]))
    assert all(a < b for a, b in zip(by_rounds, by_rounds[1:]))


def _opacus_rdp():
    """Opacus's RDP analysis module (numpy and scipy only), loaded without importing torch through opacus/__init__."""
    spec = importlib.util.find_spec("opacus")
    if spec is None or spec.origin is None:
        pytest.skip("opacus is not installed")
    path = pathlib.Path(spec.origin).parent / "accountants" / "analysis" / "rdp.py"
    mod_spec = importlib.util.spec_from_file_location("_opacus_rdp_analysis", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("q,sigma,rounds", [(0.1, 1.0, 100), (0.02, 0.8, 1000), (0.5, 2.0, 50)])
def test_client_epsilon_equals_opacus_rdp_accountant(q, sigma, rounds):
    rdp = _opacus_rdp()  # what RDPAccountant.get_epsilon runs, with history [(sigma, q, rounds)]
    orders = list(pv.ORDERS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns when the best order sits at an end of the list
        theirs, _ = rdp.get_privacy_spent(orders=orders, rdp=rdp.compute_rdp(q=q, noise_multiplier=sigma,
                                                                              steps=rounds, orders=orders), delta=1e-5)
    assert pv.epsilon(q, sigma, rounds, 1e-5) == pytest.approx(float(theirs), rel=1e-6)


@pytest.mark.slow
def test_dp_fedavg_on_real_processes_equals_the_reference():
    shards = _shards(4, n=400)
    want, _ = dp.reference_dp_fedavg(W0, LIKE, shards, 2, q=0.5, C=1.0, sigma=1.0, **LOCAL)
    got, _, res = dp.run_dp_fedavg(W0, LIKE, shards, 3, backend="process", rounds=2, q=0.5, C=1.0, sigma=1.0,
                                   timeout=120, **LOCAL)
    assert res.backend == "process"
    np.testing.assert_array_equal(got, want)
