"""Chapter 14: gossip averaging over the communicator, against W^t x on one machine and the spectral-gap rate."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.ml import gossip as gs

TOPOLOGIES = ["ring", "torus", "complete", "regular3"]


@pytest.mark.parametrize("name,K", [(n, K) for n in TOPOLOGIES for K in (2, 4, 6, 8, 12) if n != "regular3" or K >= 4])
def test_metropolis_weights_are_symmetric_and_doubly_stochastic(name, K):
    W = gs.metropolis_weights(gs.topology(name, K))
    np.testing.assert_allclose(W, W.T, atol=0)
    np.testing.assert_allclose(W.sum(axis=0), 1.0, atol=1e-15)
    np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-15)
    assert W.min() >= 0 and 0 < gs.spectral_gap(W) <= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("name", ["ring", "torus", "complete"])
def test_gossip_equals_the_one_machine_iteration_for_every_K(name, K, dtype):
    X0 = np.random.default_rng(K).standard_normal((K, 7)).astype(dtype)
    nb = gs.topology(name, K)
    X, res = gs.run_gossip(X0, nb, 12)
    assert X.dtype == dtype
    np.testing.assert_array_equal(X, gs.reference_gossip(X0, nb, 12))  # same sums, same order
    W = gs.metropolis_weights(nb)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(X, np.linalg.matrix_power(W, 12) @ X0.astype(np.float64), atol=tol)
    np.testing.assert_allclose(X.mean(axis=0), X0.astype(np.float64).mean(axis=0), atol=tol)  # the mean is kept
    for i in range(K):  # each rank talks to its neighbours only: d_i messages per step
        assert res.stats[i].messages_sent == 12 * len(nb[i])
        assert res.stats[i].bytes_sent == 12 * len(nb[i]) * X0[0].nbytes


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_gossip_converges_to_the_exact_mean(name):
    K = 16
    X0 = np.random.default_rng(0).standard_normal((K, 3))
    nb = gs.topology(name, K)
    lam = gs.second_eigenvalue(gs.metropolis_weights(nb))
    steps = 1 if lam < 1e-12 else int(np.ceil(np.log(1e-10) / np.log(lam)))  # the bound reaches 1e-10
    X, _ = gs.run_gossip(X0, nb, steps)
    np.testing.assert_allclose(X, np.broadcast_to(X0.mean(axis=0), X0.shape), atol=1e-8)


@pytest.mark.parametrize("K", [8, 16, 32])
@pytest.mark.parametrize("name", ["ring", "torus", "regular3"])
def test_error_decays_at_the_rate_of_the_second_eigenvalue(name, K):
    nb = gs.topology(name, K)
    lam = gs.second_eigenvalue(gs.metropolis_weights(nb))
    X0 = np.random.default_rng(1).standard_normal((K, 64))
    steps = 40
    path, _ = gs.run_gossip(X0, nb, steps, trajectory=True)
    err = np.array([gs.consensus_error(X, X0) for X in path])
    t = np.arange(1, steps + 1)
    assert np.all(err <= lam ** t * (1 + 1e-9))  # the bound, every step
    late = slice(steps // 2, steps)  # the slowest mode dominates late: the measured rate is |lambda_2|
    rate = np.exp(np.polyfit(t[late], np.log(err[late]), 1)[0])
    assert abs(rate - lam) < 0.02 * lam + 1e-3, (rate, lam)


def test_a_bigger_spectral_gap_mixes_faster():
    K = 16
    gaps = {n: gs.spectral_gap(gs.metropolis_weights(gs.topology(n, K))) for n in ["ring", "torus", "complete"]}
    assert gaps["ring"] < gaps["torus"] < gaps["complete"] == pytest.approx(1.0)
    assert gaps["ring"] == pytest.approx(1 - (1 + 2 * np.cos(2 * np.pi / K)) / 3)  # the ring's closed form


@pytest.mark.slow
def test_gossip_on_real_processes_equals_reference():
    X0 = np.random.default_rng(0).standard_normal((3, 5))
    nb = gs.ring(3)
    X, res = gs.run_gossip(X0, nb, 5, backend="process", timeout=120)
    assert res.backend == "process"
    np.testing.assert_array_equal(X, gs.reference_gossip(X0, nb, 5))


def test_graphs_and_errors():
    assert gs.ring(1) == [[]] and gs.ring(2) == [[1], [0]]
    nb = gs.random_regular(10, 3, seed=4)
    assert all(len(x) == 3 for x in nb)
    with pytest.raises(ValueError, match="n\\*d even"):
        gs.random_regular(5, 3)
    with pytest.raises(ValueError, match="undirected"):
        gs.metropolis_weights([[1], []])
    with pytest.raises(ValueError, match="unknown topology"):
        gs.topology("star", 4)
