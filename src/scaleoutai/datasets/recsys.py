"""Synthetic user-item interactions for two-tower retrieval, a pure function of the seed (Chapter 38).

Hidden structure: feature j has a latent vector F_j, item i a latent vector V_i (both N(0, I_f / f)).
User u carries a bag of feature ids (multi-hot, Zipf-popular features: the input of an EmbeddingBag)
with positive weights; its taste is U_u = sum_j w_j F_j / sum_j w_j plus a little noise, scaled to norm 1, so the bag
predicts what the user likes. The user then picks distinct items with

    log p(i | u) = -zipf log(i + 1) + sharpness * sqrt(f) U_u . V_i   (Gumbel top-k: without replacement)

so item 0 is the hottest id (ids sorted by popularity, as after a frequency re-indexing), and each
user's last ``test_per_user`` picks (in a random order) are held out. Train pairs are (user, item) rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Interactions", "recsys_interactions"]


@dataclass(frozen=True)
class Interactions:
    """Train pairs, CSR bags (``bag_offsets`` into ``bag_ids`` / ``bag_weights``), held-out test items."""

    train_users: np.ndarray  # (n_train,) int64: the train pairs come first (the catalogue's rows)
    train_items: np.ndarray  # (n_train,) int64
    bag_offsets: np.ndarray  # (n_users + 1,) int64: user u's features are bag_ids[o[u]:o[u+1]]
    bag_ids: np.ndarray  # int64 feature ids
    bag_weights: np.ndarray  # float, > 0: EmbeddingBag's per_sample_weights (mode "sum")
    test_offsets: np.ndarray  # (n_users + 1,) int64 into test_items
    test_items: np.ndarray  # int64
    item_popularity: np.ndarray  # (n_items,) the Zipf prior, normalised
    user_taste: np.ndarray  # (n_users, f) the hidden U
    item_taste: np.ndarray  # (n_items, f) the hidden V
    n_users: int
    n_items: int
    n_features: int

    def bags(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, offsets, weights) of the users' feature bags, in the layout of torch's EmbeddingBag."""
        users = np.asarray(users, dtype=np.int64)
        lo, hi = self.bag_offsets[users], self.bag_offsets[users + 1]
        lengths = hi - lo
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(users) else lengths
        rows = np.repeat(lo - offsets, lengths) + np.arange(int(lengths.sum()))
        return self.bag_ids[rows], offsets, self.bag_weights[rows]

    def test_of(self, u: int) -> np.ndarray:
        return self.test_items[self.test_offsets[u]:self.test_offsets[u + 1]]


def _zipf(n: int, s: float) -> np.ndarray:
    w = np.arange(1, n + 1, dtype=np.float64) ** -float(s)
    return w / w.sum()


def recsys_interactions(n_users: int, n_items: int, n_features: int, per_user: int = 12, test_per_user: int = 2,
                        bag_size: tuple[int, int] = (3, 8), factors: int = 8, zipf: float = 1.1,
                        sharpness: float = 3.0, seed: int = 0, dtype: Any = np.float64) -> Interactions:
    """Users with feature bags pick ``per_user`` distinct items each; ``test_per_user`` of them held out."""
    for name, v in (("n_users", n_users), ("n_items", n_items), ("n_features", n_features), ("factors", factors)):
        if int(v) != v or v < 1:
            raise ValueError(f"recsys_interactions needs {name} >= 1, got {v!r}")
    lo_bag, hi_bag = bag_size
    if not 1 <= lo_bag <= hi_bag <= n_features:
        raise ValueError(f"bag_size must satisfy 1 <= lo <= hi <= n_features={n_features}, got {bag_size}")
    if not 0 <= test_per_user < per_user <= n_items:
        raise ValueError(f"need 0 <= test_per_user < per_user <= n_items, got {test_per_user}, {per_user}, {n_items}")
    rng = np.random.default_rng(seed)
    f = int(factors)
    F = rng.standard_normal((n_features, f)) / np.sqrt(f)
    V = rng.standard_normal((n_items, f)) / np.sqrt(f)
    lengths = rng.integers(lo_bag, hi_bag + 1, size=n_users)
    log_feat = np.log(_zipf(n_features, 0.8))
    chosen = []
    for lo in range(0, n_users, 1024):  # Gumbel top-k: distinct Zipf-popular features per user
        g = log_feat + rng.gumbel(size=(min(1024, n_users - lo), n_features))
        top = np.argsort(-g, axis=1)[:, :hi_bag]
        chosen += [row[:m] for row, m in zip(top, lengths[lo:lo + 1024])]
    bag_ids = np.concatenate(chosen)
    bag_w = rng.uniform(0.5, 2.0, size=len(bag_ids))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    seg = np.repeat(np.arange(n_users), lengths)
    U = np.zeros((n_users, f))
    np.add.at(U, seg, bag_w[:, None] * F[bag_ids])
    U = U / np.add.reduceat(bag_w, offsets[:-1])[:, None] + 0.1 * rng.standard_normal(U.shape) / np.sqrt(f)
    U /= np.linalg.norm(U, axis=1, keepdims=True)  # unit taste: U . V ~ N(0, 1/f), the logit scale is sharpness
    pop = _zipf(n_items, zipf)
    picks = np.empty((n_users, per_user), dtype=np.int64)
    for lo in range(0, n_users, 1024):  # Gumbel top-k, a block of users at a time (memory n_items x 1024)
        logits = np.log(pop)[None, :] + sharpness * np.sqrt(f) * U[lo:lo + 1024] @ V.T
        g = logits + rng.gumbel(size=logits.shape)
        top = np.argpartition(-g, per_user - 1, axis=1)[:, :per_user]
        order = np.argsort(-np.take_along_axis(g, top, axis=1), axis=1)
        picks[lo:lo + 1024] = rng.permuted(np.take_along_axis(top, order, axis=1), axis=1)
    n_train = per_user - test_per_user
    users = np.repeat(np.arange(n_users, dtype=np.int64), n_train)
    return Interactions(users, picks[:, :n_train].reshape(-1).copy(), offsets, bag_ids.astype(np.int64),
                        bag_w.astype(dtype), np.arange(0, n_users * test_per_user + 1, test_per_user, dtype=np.int64),
                        picks[:, n_train:].reshape(-1).copy(), pop, U.astype(dtype), V.astype(dtype),
                        int(n_users), int(n_items), int(n_features))
