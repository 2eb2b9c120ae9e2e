"""Chapter 38's interactions: a pure function of the seed, Zipf-popular items, EmbeddingBag-shaped bags,
held-out items disjoint from each user's train items, and a taste that the feature bags predict."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.datasets.recsys import recsys_interactions


@pytest.fixture(scope="module")
def data():
    return recsys_interactions(600, 300, 80, per_user=8, test_per_user=2, seed=5)


def test_same_seed_same_bytes_other_seed_other_data(data):
    again = recsys_interactions(600, 300, 80, per_user=8, test_per_user=2, seed=5)
    other = recsys_interactions(600, 300, 80, per_user=8, test_per_user=2, seed=6)
    for name in ("bag_ids", "bag_weights", "train_items", "test_items", "user_taste"):
        assert np.array_equal(getattr(data, name), getattr(again, name)), name
    assert not np.array_equal(data.train_items, other.train_items)


def test_shapes_splits_and_disjoint_train_and_test_items(data):
    assert len(data.train_users) == len(data.train_items) == 600 * 6 and len(data.test_items) == 600 * 2
    assert np.array_equal(data.train_users, np.repeat(np.arange(600), 6))
    for u in range(0, 600, 37):
        train = data.train_items[data.train_users == u]
        assert len(set(train) | set(data.test_of(u))) == 8  # distinct picks, none both train and test
    lengths = np.diff(data.bag_offsets)
    assert lengths.min() >= 3 and lengths.max() <= 8 and (data.bag_weights > 0).all()
    for u in range(0, 600, 53):  # no feature twice in a bag
        bag = data.bag_ids[data.bag_offsets[u]:data.bag_offsets[u + 1]]
        assert len(np.unique(bag)) == len(bag)


def test_bags_come_in_torch_embedding_bag_layout(data):
    import torch

    users = np.array([5, 0, 5, 17])
    ids, offsets, w = data.bags(users)
    assert offsets[0] == 0 and len(offsets) == 4 and len(ids) == len(w) == np.diff(data.bag_offsets)[users].sum()
    table = np.random.default_rng(0).standard_normal((80, 3))
    pooled = torch.nn.functional.embedding_bag(torch.tensor(ids), torch.tensor(table), torch.tensor(offsets),
                                               mode="sum", per_sample_weights=torch.tensor(w)).numpy()
    for row, u in zip(pooled, users):
        lo, hi = data.bag_offsets[u], data.bag_offsets[u + 1]
        np.testing.assert_allclose(row, data.bag_weights[lo:hi] @ table[data.bag_ids[lo:hi]], atol=1e-12)


def test_item_popularity_is_zipf_with_item_zero_hottest_and_taste_matters(data):
    counts = np.bincount(data.train_items, minlength=300)
    assert counts.argmax() < 10 and counts[:10].mean() > 5 * counts[-100:].mean()
    # the hidden taste predicts held-out picks far better than chance
    S = data.user_taste @ data.item_taste.T
    rank_of_test = [(S[u] > S[u, i]).sum() for u in range(600) for i in data.test_of(u)]
    assert np.median(rank_of_test) < 300 * 0.3


@pytest.mark.parametrize("kw", [dict(n_users=0), dict(per_user=2, test_per_user=2), dict(bag_size=(5, 2)),
                                dict(bag_size=(1, 500))])
def test_bad_sizes_raise_one_clear_error(kw):
    args = dict(n_users=10, n_items=20, n_features=30)
    args.update(kw)
    with pytest.raises(ValueError):
        recsys_interactions(**args)
