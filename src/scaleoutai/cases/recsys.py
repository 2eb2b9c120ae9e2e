"""Two-tower retrieval on one machine: the dense reference, batches, retrieval and its metrics (Chapter 38).

The model. User tower: u = MLP_u(EmbeddingBag(bag of feature ids, mode sum or mean, optional
per-sample weights)); item tower: v = MLP_v(E_item[i]); score s(u, i) = u . v / tau. Each MLP is
Linear-ReLU-Linear (the item tower's last Linear without bias). Loss: in-batch sampled softmax over a
batch of B (user, item) pairs, where the other B - 1 items of the batch are the negatives (optionally
logQ-corrected, s_ij - log q_j, so popular items are not punished for being sampled often as negatives):

    L = -(1/B) sum_i log( exp(s_ii) / sum_j exp(s_ij) )

``reference_model`` is that model in torch (``nn.EmbeddingBag`` and ``nn.Embedding``, the production
layers); ``reference_train`` trains it with torch's SGD or Adagrad (acc += g^2, p -= lr g / (sqrt(acc) + eps):
a row with no gradient does not move, so the dense update equals the sparse one row for row).
``recsys_shard`` and ``recsys_train`` shard the two tables over K ranks and must equal it.
Metrics (Section 7): recall@k = |top-k & relevant| / |relevant| and NDCG@k = DCG@k / IDCG@k with binary
gains and log2(rank + 1) discounts, averaged over users that have a relevant item; retrieval is
brute-force top-k over the item tower, with the user's train items masked.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["MLP_KEYS", "MODES", "OPTIMIZERS", "init_two_tower", "batch_rows", "make_batch", "reference_model",
           "to_params", "make_optimizer", "reference_step", "reference_train", "tower_vectors", "topk_items",
           "popularity_topk", "recall_at_k", "ndcg_at_k", "csr_lists"]

# The data-parallel parameters. The item tower's output has no bias: it would shift every logit of a row
# by u_i . b, which the softmax ignores, so its gradient is pure rounding (and Adagrad would amplify it).
MLP_KEYS = ("u.W0", "u.b0", "u.W1", "u.b1", "i.W0", "i.b0", "i.W1")
MODES = ("sum", "mean")
OPTIMIZERS = ("sgd", "adagrad")  # Adagrad's state is per coordinate: it shards with the rows
ADAGRAD_EPS = 1e-10


def init_two_tower(n_features: int, n_items: int, d: int = 16, hidden: int = 32, out: int = 16, seed: int = 0,
                   dtype: Any = np.float64) -> dict[str, np.ndarray]:
    """Tables N(0, 1/d) rows, MLP weights He-uniform, biases 0: {"user_table", "item_table", *MLP_KEYS}."""
    for name, v in (("n_features", n_features), ("n_items", n_items), ("d", d), ("hidden", hidden), ("out", out)):
        if int(v) != v or v < 1:
            raise ValueError(f"init_two_tower needs {name} >= 1, got {v!r}")
    rng = np.random.default_rng(seed)
    p = {"user_table": rng.standard_normal((n_features, d)) / np.sqrt(d),
         "item_table": rng.standard_normal((n_items, d)) / np.sqrt(d)}
    for t in ("u", "i"):
        for k, (fan_in, fan_out) in enumerate(((d, hidden), (hidden, out))):
            lim = np.sqrt(6.0 / fan_in)
            p[f"{t}.W{k}"] = rng.uniform(-lim, lim, size=(fan_in, fan_out))
            p[f"{t}.b{k}"] = np.zeros(fan_out)
    return {k: p[k].astype(dtype) for k in ("user_table", "item_table", *MLP_KEYS)}


def batch_rows(n_train: int, B: int, step: int, seed: int = 0) -> np.ndarray:
    """The train rows of global batch ``step``: B distinct rows, a pure function of (seed, step), so every
    rank (of any K) computes the same batch and takes its block ``block_range(B, K, rank)``."""
    if not 1 <= B <= n_train:
        raise ValueError(f"batch size B={B} must be in 1..{n_train} (the number of train pairs)")
    return np.random.default_rng([seed, step]).choice(n_train, size=B, replace=False)


def make_batch(data: Any, rows: np.ndarray, weighted: bool = False) -> dict[str, np.ndarray | None]:
    """The user bags (ids, offsets, weights or None) and item ids of train rows ``rows`` of ``data``."""
    ids, offsets, w = data.bags(data.train_users[rows])
    return {"ids": ids, "offsets": offsets, "weights": w if weighted else None, "items": data.train_items[rows]}


def _tower(torch: Any, x: Any, W0: Any, b0: Any, W1: Any, b1: Any = None) -> Any:
    y = torch.relu(x @ W0 + b0) @ W1
    return y if b1 is None else y + b1


def _in_batch_loss(torch: Any, u: Any, v_all: Any, labels: Any, B: int, tau: float, log_q: Any = None) -> Any:
    """sum_i CE(u_i . v_all / tau - log q, label_i) / B: this rank's share of the in-batch softmax loss."""
    logits = u @ v_all.T / tau
    if log_q is not None:
        logits = logits - log_q
    return torch.nn.functional.cross_entropy(logits, labels, reduction="sum") / B


def reference_model(params: dict[str, np.ndarray], mode: str = "sum") -> Any:
    """The dense two-tower model as a torch Module: EmbeddingBag(user_table, mode) and Embedding(item_table)."""
    import torch

    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: choose one of {MODES} (max pooling is not differentiable row-wise)")

    class TwoTower(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.users = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(params["user_table"]), freeze=False,
                                                               mode=mode)
            self.items = torch.nn.Embedding.from_pretrained(torch.tensor(params["item_table"]), freeze=False)
            self.mlp = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(torch.tensor(params[k]))
                                               for k in MLP_KEYS})

        def tower(self, t: str, x: Any) -> Any:
            m = self.mlp
            return _tower(torch, x, m[f"{t}_W0"], m[f"{t}_b0"], m[f"{t}_W1"], m[f"{t}_b1"] if t == "u" else None)

        def forward(self, ids: Any, offsets: Any, weights: Any, items: Any) -> tuple[Any, Any]:
            return (self.tower("u", self.users(ids, offsets, per_sample_weights=weights)),
                    self.tower("i", self.items(items)))

    return TwoTower()


def to_params(model: Any) -> dict[str, np.ndarray]:
    """The numpy parameter dict of a ``reference_model`` (copies)."""
    p = {"user_table": model.users.weight.detach().numpy().copy(),
         "item_table": model.items.weight.detach().numpy().copy()}
    p.update({k: model.mlp[k.replace(".", "_")].detach().numpy().copy() for k in MLP_KEYS})
    return p


def make_optimizer(model: Any, optimizer: str, lr: float) -> Any:
    """torch.optim.SGD or torch.optim.Adagrad (eps 1e-10, no decay) over every parameter of the model."""
    import torch

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r}: choose one of {OPTIMIZERS}")
    if optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr)
    return torch.optim.Adagrad(model.parameters(), lr=lr, eps=ADAGRAD_EPS)


def reference_step(model: Any, opt: Any, batch: dict[str, Any], tau: float = 1.0,
                   log_q: np.ndarray | None = None) -> float:
    """One optimizer step of the dense model on the whole global batch; returns the loss before the step."""
    import torch

    dt = model.users.weight.dtype  # weights and log q in the model's precision, as the sharded ranks do
    w = None if batch["weights"] is None else torch.as_tensor(batch["weights"]).to(dt)
    u, v = model(torch.as_tensor(batch["ids"]), torch.as_tensor(batch["offsets"]), w, torch.as_tensor(batch["items"]))
    lq = None if log_q is None else torch.as_tensor(log_q[batch["items"]]).to(dt)
    loss = _in_batch_loss(torch, u, v, torch.arange(len(u)), len(u), tau, lq)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.detach())


def reference_train(data: Any, params: dict[str, np.ndarray], steps: int, B: int, lr: float, mode: str = "sum",
                    weighted: bool = False, tau: float = 1.0, log_q: np.ndarray | None = None, seed: int = 0,
                    optimizer: str = "sgd") -> tuple[dict[str, np.ndarray], list[float]]:
    """``steps`` steps of the dense torch model (torch's own optimizer) on batches ``batch_rows(.., step, seed)``."""
    if weighted and mode != "sum":
        raise ValueError("per-sample weights need mode='sum' (torch's EmbeddingBag rule)")
    model = reference_model(params, mode)
    opt = make_optimizer(model, optimizer, lr)
    losses = [reference_step(model, opt, make_batch(data, batch_rows(len(data.train_items), B, s, seed), weighted),
                             tau, log_q) for s in range(steps)]
    return to_params(model), losses


def tower_vectors(params: dict[str, np.ndarray], data: Any, mode: str = "sum",
                  weighted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(U, V): every user's and every item's tower output, from the dense model."""
    import torch

    model = reference_model(params, mode)
    ids, offsets, w = data.bags(np.arange(data.n_users))
    with torch.no_grad():
        u, v = model(torch.as_tensor(ids), torch.as_tensor(offsets),
                     torch.as_tensor(w).to(model.users.weight.dtype) if weighted else None,
                     torch.arange(data.n_items))
    return u.numpy(), v.numpy()


def csr_lists(offsets: np.ndarray, values: np.ndarray) -> list[np.ndarray]:
    """CSR (offsets, values) as one array per row."""
    return [values[offsets[u]:offsets[u + 1]] for u in range(len(offsets) - 1)]


def _topk_rows(S: np.ndarray, k: int) -> np.ndarray:
    """Row-wise top-k column indices by descending score, ties broken by the smaller index."""
    k = min(k, S.shape[1])
    part = np.argpartition(-S, k - 1, axis=1)[:, :k] if k < S.shape[1] else np.tile(np.arange(S.shape[1]), (len(S), 1))
    vals = np.take_along_axis(S, part, axis=1)
    # argpartition picks arbitrarily among values tied with the k-th: redo those rows with a stable sort
    tied = np.flatnonzero((S >= vals.min(axis=1, keepdims=True)).sum(axis=1) > k)
    for r in tied:
        part[r] = np.argsort(-S[r], kind="stable")[:k]
        vals[r] = S[r, part[r]]
    order = np.lexsort((part, -vals), axis=1)
    return np.take_along_axis(part, order, axis=1)


def topk_items(U: np.ndarray, V: np.ndarray, k: int, exclude: Sequence[np.ndarray] | None = None,
               chunk: int = 2048) -> np.ndarray:
    """Brute-force maximum inner product search: the k items of largest u . v per user, ``exclude[u]`` masked."""
    if int(k) != k or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    out = np.empty((len(U), min(int(k), len(V))), dtype=np.int64)
    for lo in range(0, len(U), chunk):
        S = U[lo:lo + chunk] @ V.T
        if exclude is not None:
            for r, ex in enumerate(exclude[lo:lo + chunk]):
                S[r, ex] = -np.inf
        out[lo:lo + chunk] = _topk_rows(S, int(k))
    return out


def popularity_topk(train_items: np.ndarray, n_items: int, n_users: int, k: int,
                    exclude: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The baseline: the k most-interacted train items for every user (minus the user's own)."""
    counts = np.bincount(train_items, minlength=n_items).astype(np.float64)
    return topk_items(np.ones((n_users, 1)), counts[:, None], k, exclude)


def _check(topk: np.ndarray, relevant: Sequence[np.ndarray], k: int) -> None:
    if int(k) != k or not 1 <= k <= topk.shape[1]:
        raise ValueError(f"k={k!r} must be in 1..{topk.shape[1]} (the columns of the ranked lists)")
    if len(topk) != len(relevant):
        raise ValueError(f"{len(topk)} ranked lists but {len(relevant)} relevant sets: one per user")


def _hits(topk: np.ndarray, relevant: Sequence[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """hits[u, r] = topk[u, r] is relevant for u (r < k), and |relevant[u]| (distinct), in one np.isin."""
    sets = [np.unique(np.asarray(rel, dtype=np.int64)) for rel in relevant]
    n_rel = np.array([len(x) for x in sets])
    M = int(max(topk.max(initial=0), max((x.max() for x in sets if len(x)), default=0))) + 1
    keys = np.concatenate([u * M + x for u, x in enumerate(sets)] + [np.zeros(0, np.int64)])
    top = topk[:, :k].astype(np.int64) + M * np.arange(len(topk), dtype=np.int64)[:, None]
    return np.isin(top, keys), n_rel


def recall_at_k(topk: np.ndarray, relevant: Sequence[np.ndarray], k: int) -> float:
    """mean over users with relevant items of |topk[u, :k] & relevant[u]| / |relevant[u]|."""
    _check(topk, relevant, k)
    hits, n_rel = _hits(topk, relevant, k)
    has = n_rel > 0
    return float(np.mean(hits[has].sum(axis=1) / n_rel[has])) if has.any() else float("nan")


def ndcg_at_k(topk: np.ndarray, relevant: Sequence[np.ndarray], k: int) -> float:
    """mean of DCG@k / IDCG@k, DCG = sum_{r < k} [topk[u, r] relevant] / log2(r + 2), binary gains."""
    _check(topk, relevant, k)
    hits, n_rel = _hits(topk, relevant, k)
    has = n_rel > 0
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.cumsum(disc)[np.minimum(k, n_rel[has]) - 1]
    return float(np.mean((hits[has] * disc).sum(axis=1) / ideal)) if has.any() else float("nan")
