"""Chapter 14: FedAvg / FedProx over the communicator against the one-machine reference, dropout, non-IID."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, collectives, datasets, nn
from scaleoutai.ml import federated as fd

CLIENTS = 7


def _setup(dtype=np.float64, clients=CLIENTS, alpha=0.5, n=420, seed=1):
    X, y = datasets.classification(n, 6, classes=3, seed=0, dtype=dtype)
    parts = fd.dirichlet_split(y, clients, alpha, seed=seed)
    like = nn.mlp_init([6, 8, 3], seed=0, dtype=dtype)
    return [(X[p], y[p]) for p in parts], like, nn.flatten(like)


OPTS = dict(rounds=3, epochs=2, lr=0.1, batch_size=16, seed=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 12])
def test_fedavg_equals_reference_for_every_K_including_more_ranks_than_clients(K, dtype):
    shards, like, w0 = _setup(dtype)
    assert len({len(s[0]) for s in shards}) > 1  # uneven n_k
    want, hist = fd.reference_fedavg(w0, like, shards, **OPTS)
    got, got_hist, _ = fd.run_fedavg(w0, like, shards, K, **OPTS)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)  # the same sums in the same order: bit for bit
    assert [h["reported"] for h in got_hist] == [h["reported"] for h in hist] == [list(range(CLIENTS))] * 3
    assert not np.array_equal(got, w0)


def test_aggregate_is_the_sample_weighted_average_not_the_plain_mean():
    shards, like, w0 = _setup()
    got, _, _ = fd.run_fedavg(w0, like, shards, 4, rounds=1, epochs=2, lr=0.1, batch_size=16, seed=3)
    models = [fd.client_update(w0, like, X, y, 2, 0.1, 16, [3, 0, k, 3]) for k, (X, y) in enumerate(shards)]
    n = np.array([len(X) for X, _ in shards], dtype=float)
    np.testing.assert_allclose(got, np.average(np.stack(models), axis=0, weights=n), rtol=0, atol=1e-12)
    assert np.abs(got - np.mean(models, axis=0)).max() > 1e-3  # uneven n_k: the plain mean is different


def test_one_full_batch_step_per_round_is_sync_sgd_on_the_union_of_the_data():
    shards, like, w0 = _setup()
    got, _, _ = fd.run_fedavg(w0, like, shards, 3, rounds=1, epochs=1, lr=0.3, batch_size=0, seed=0)
    X = np.concatenate([s[0] for s in shards])
    y = np.concatenate([s[1] for s in shards])
    params = nn.unflatten(w0, like)
    logits, cache = nn.mlp_forward(params, X)
    _, grads = nn.mlp_backward(params, cache, nn.softmax_cross_entropy(logits, y)[1])
    np.testing.assert_allclose(got, w0 - 0.3 * nn.flatten(grads), rtol=0, atol=1e-12)


@pytest.mark.parametrize("K", [1, 2, 4, 8])
def test_dropped_clients_are_excluded_and_the_rest_weighted_exactly(K):
    shards, like, w0 = _setup()
    opts = dict(OPTS, p_drop=0.5, rounds=1)
    got, hist, _ = fd.run_fedavg(w0, like, shards, K, **opts)
    reported = hist[0]["reported"]
    assert 0 < len(reported) < CLIENTS  # this seed drops some, not all
    assert reported == [k for k in range(CLIENTS) if not fd.drops(k, 0, 0.5, 3)]
    models = [fd.client_update(w0, like, *shards[k], 2, 0.1, 16, [3, 0, k, 3]) for k in reported]
    n = [len(shards[k][0]) for k in reported]
    np.testing.assert_allclose(got, np.average(np.stack(models), axis=0, weights=n), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got, fd.reference_fedavg(w0, like, shards, **opts)[0])


@pytest.mark.parametrize("K", [1, 3, 6])
def test_a_round_where_every_client_drops_keeps_the_model(K):
    shards, like, w0 = _setup()
    got, hist, _ = fd.run_fedavg(w0, like, shards, K, **dict(OPTS, p_drop=1.0))
    np.testing.assert_array_equal(got, w0)
    assert all(h["reported"] == [] for h in hist)


def test_a_crashed_client_rank_is_excluded_from_every_round():
    shards, like, w0 = _setup()
    K, dead = 4, 2
    got, hist, res = fd.run_fedavg(w0, like, shards, K, faults=cluster.Faults(crash={dead: 0}), **OPTS)
    lost = tuple(collectives.worker_range(CLIENTS, K, dead))
    assert lost and all(not set(lost) & set(h["reported"]) for h in hist)
    np.testing.assert_array_equal(got, fd.reference_fedavg(w0, like, shards, never_report=lost, **OPTS)[0])
    assert isinstance(res.values[dead], cluster.RankCrashed)


@pytest.mark.parametrize("K", [2, 5])
def test_partial_participation_selects_the_same_clients_as_the_reference(K):
    shards, like, w0 = _setup(clients=10)
    opts = dict(OPTS, fraction=0.3)
    want, hist = fd.reference_fedavg(w0, like, shards, **opts)
    got, got_hist, _ = fd.run_fedavg(w0, like, shards, K, **opts)
    np.testing.assert_array_equal(got, want)
    assert all(len(h["selected"]) == 3 for h in got_hist)
    assert len({tuple(h["selected"]) for h in got_hist}) > 1  # a new draw every round


def test_bytes_per_round_are_models_and_counts_never_data():
    shards, like, w0 = _setup()
    K = 4
    _, hist, res = fd.run_fedavg(w0, like, shards, K, rounds=2, epochs=1, lr=0.1, batch_size=16)
    P = w0.size
    assert res.stats[0].bytes_sent == 2 * (K - 1) * P * 8  # w_t to every client rank, each round
    for q in range(1, K):
        m = len(collectives.worker_range(CLIENTS, K, q))
        assert res.stats[q].bytes_sent == 2 * m * (P * 8 + 16)  # per client: its model and (k, n_k)
    data_bytes = sum(s[0].nbytes for s in shards)
    assert sum(s.bytes_sent for s in res.stats[1:]) < data_bytes


@pytest.mark.slow
def test_fedavg_on_two_real_processes_equals_reference():
    shards, like, w0 = _setup()
    opts = dict(OPTS, p_drop=0.3)
    want, _ = fd.reference_fedavg(w0, like, shards, **opts)
    got, _, res = fd.run_fedavg(w0, like, shards, 3, backend="process", timeout=120, **opts)
    assert res.backend == "process"
    np.testing.assert_array_equal(got, want)


def test_dirichlet_split_puts_every_sample_on_exactly_one_client():
    _, y = datasets.classification(1000, 2, classes=5, seed=0)
    for alpha in (0.05, 1.0, 1000.0):
        parts = fd.dirichlet_split(y, 9, alpha, seed=2)
        assert len(parts) == 9
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(1000))
    iid = fd.label_histogram(y, fd.dirichlet_split(y, 4, 1000.0, seed=0), 5)
    skew = fd.label_histogram(y, fd.dirichlet_split(y, 4, 0.05, seed=0), 5)
    share = lambda h: h.max(axis=1) / np.maximum(1, h.sum(axis=1))  # noqa: E731 - the dominant class's share
    assert share(iid).max() < 0.3 and share(skew).mean() > 0.6


def _accuracy_after(alpha, mu=0.0, rounds=3):
    X, y = datasets.classification(3000, 20, classes=10, separation=3.0, seed=0)
    parts = fd.dirichlet_split(y[:2000], 10, alpha, seed=1)
    like = nn.mlp_init([20, 32, 10], seed=0)
    w, hist = fd.reference_fedavg(nn.flatten(like), like, [(X[p], y[p]) for p in parts], rounds, epochs=5,
                                  lr=0.1, batch_size=32, mu=mu, seed=0)
    return fd.accuracy(w, like, X[2000:], y[2000:]), np.mean([h["spread"] for h in hist])


def test_label_skew_lowers_accuracy_and_fedprox_reduces_client_drift():
    acc_iid, _ = _accuracy_after(100.0)
    acc_skew, drift_avg = _accuracy_after(0.1)
    _, drift_prox = _accuracy_after(0.1, mu=1.0)
    assert acc_iid > acc_skew + 0.03, (acc_iid, acc_skew)
    assert drift_prox < 0.5 * drift_avg, (drift_prox, drift_avg)


def test_bad_input_gets_a_readable_error():
    shards, like, w0 = _setup()
    with pytest.raises(ValueError, match="alpha must be > 0"):
        fd.dirichlet_split(np.zeros(5, int), 2, 0.0)
    with pytest.raises(ValueError, match="p_drop"):
        fd.reference_fedavg(w0, like, shards, 1, p_drop=1.5)
    with pytest.raises(ValueError, match="fraction"):
        fd.select_clients(5, 0.0, 0, 0)
    assert fd.weighted_average([w0, w0], [0, 0]) is None


def _torch_client(w, like, X, y, epochs, lr, batch_size, seed):
    """The client update written in torch (autograd, torch.optim.SGD), batches in the library's order."""
    import torch

    params = {k: torch.tensor(v, requires_grad=True) for k, v in nn.unflatten(w, like).items()}
    opt = torch.optim.SGD(list(params.values()), lr=lr)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    rng, n = np.random.default_rng(seed), len(X)
    for _ in range(epochs):
        order = rng.permutation(n)
        for lo in range(0, n, batch_size):
            rows = torch.tensor(order[lo:lo + batch_size])
            h = Xt[rows]
            for i in range(len(like) // 2):
                h = h @ params[f"W{i}"] + params[f"b{i}"]
                h = torch.relu(h) if i < len(like) // 2 - 1 else h
            opt.zero_grad()
            torch.nn.functional.cross_entropy(h, yt[rows]).backward()
            opt.step()
    return len(X), nn.flatten({k: v.detach().numpy() for k, v in params.items()})


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import a test module
    from ray_start import start_local_ray

    start_local_ray(ray)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_fedavg_with_ray_actors_training_in_torch_equals_ours(ray_local):
    ray = ray_local
    shards, like, w0 = _setup(clients=3)  # one actor (a worker process importing torch) per client

    @ray.remote(num_cpus=0)
    class Client:
        def __init__(self, X, y):
            self.X, self.y = X, y

        def train(self, w, k, t):
            return _torch_client(w, like, self.X, self.y, 2, 0.1, 16, [3, t, k, 3])

    actors = [Client.remote(X, y) for X, y in shards]
    w = w0
    for t in range(3):
        out = ray.get([a.train.remote(w, k, t) for k, a in enumerate(actors)])
        w = np.average(np.stack([m for _, m in out]), axis=0, weights=[n for n, _ in out])
    want, _ = fd.reference_fedavg(w0, like, shards, **OPTS)
    np.testing.assert_allclose(w, want, rtol=0, atol=1e-10)
    assert np.abs(want - w0).max() > 1e-2
