"""Distributed RAG glue for Chapter 36: chunking, sharded embedding, fault-tolerant scatter-gather.

The search itself comes from the serving part, passed in as functions (a case imports no other part):
each shard answers ``search(queries, k) -> (D, I)`` with global ids (exact ``vectors.local_topk``, an
IVF index, FAISS), and ``merge(parts, k, metric) -> (D, I)`` is ``vectors.merge_topk``.

``scatter_gather`` (per rank): every shard searches its own index; rank 0 polls the other ranks in turn
(there is no receive-from-any, and a fixed order keeps the merge deterministic). A shard whose server
crashed, or whose answer was lost, is named in ``missing`` and left out: the answer is exact for the
shards that answered, and recall@k drops by the share of the true neighbours the missing shards held.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds

__all__ = ["sentences", "chunk", "chunk_corpus", "embed_shard", "run_embed", "scatter_gather",
           "run_scatter_gather", "lost_share"]

Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
Merge = Callable[[list[tuple[np.ndarray, np.ndarray]], int, str], tuple[np.ndarray, np.ndarray]]


def sentences(text: str) -> list[str]:
    """The sentences of a cleaned page: runs ending in a full stop, or a line's unterminated tail."""
    return [s.strip() for line in text.splitlines() for s in re.findall(r"[^.]+(?:\.|$)", line) if s.strip()]


def chunk(text: str, size: int = 3) -> list[str]:
    """Consecutive groups of ``size`` sentences (the last may be shorter): the unit that is embedded."""
    if int(size) != size or size < 1:
        raise ValueError(f"chunk size must be an integer >= 1 sentences, got {size!r}")
    s = sentences(text)
    return [" ".join(s[i:i + size]) for i in range(0, len(s), size)]


def chunk_corpus(docs: Sequence[str], ids: Sequence[int], size: int = 3) -> tuple[list[str], np.ndarray]:
    """Every page's chunks in page order, and the page id of each chunk."""
    if len(docs) != len(ids):
        raise ValueError(f"chunk_corpus needs one id per page, got {len(docs)} pages and {len(ids)} ids")
    texts, owner = [], []
    for d, i in zip(docs, ids):
        parts = chunk(d, size)
        texts += parts
        owner += [int(i)] * len(parts)
    return texts, np.asarray(owner, dtype=np.int64)


def embed_shard(comm: Comm, texts: Sequence[str], embed: Callable[[list[str]], np.ndarray],
                seconds_per_text: float = 0.0) -> np.ndarray:
    """Per rank: embed block ``comm.rank`` of ``texts`` (``block_bounds``: uneven or empty) and return
    those rows. Embedding is embarrassingly parallel: no message at all. ``seconds_per_text`` charges the
    simulator's clock instead of (or besides) the real work."""
    lo, hi = block_bounds(len(texts), comm.size)[comm.rank]
    vecs = np.asarray(embed(list(texts[lo:hi]))) if hi > lo else None
    comm.compute(seconds_per_text * (hi - lo))
    return vecs


def run_embed(texts: Sequence[str], K: int, embed: Callable[[list[str]], np.ndarray], timeout: float = 300.0,
              **run_kwargs: Any) -> tuple[np.ndarray, Any]:
    """Driver: K ranks embed their blocks; the rows concatenated in text order, and the run."""
    res = cluster.run(embed_shard, K, args=(list(texts), embed), timeout=timeout, **run_kwargs)
    parts = [v for v in res.values if v is not None]
    if not parts:
        raise ValueError("run_embed needs at least one text to embed")
    return np.concatenate(parts), res


def scatter_gather(comm: Comm, queries: np.ndarray, search: Search, k: int, merge: Merge, metric: str = "ip"
                   ) -> tuple[np.ndarray, np.ndarray, list[int]] | None:
    """Per rank: search this shard; rank 0 merges what arrives and returns (D, I, missing ranks).

    Each shard sends at most nq k (itemsize + 8) bytes (its top-k), whatever its size."""
    D, I = search(queries, k)
    if comm.rank:
        comm.send(np.ascontiguousarray(D), 0)
        comm.send(np.ascontiguousarray(I, dtype=np.int64), 0)
        return None
    parts, missing = [(D, I)], []
    for src in range(1, comm.size):
        try:
            parts.append((comm.recv(src), comm.recv(src)))
        except (cluster.PeerCrashedError, cluster.MessageLostError):
            missing.append(src)  # partial answer: the caller sees which shard is absent
    D, I = merge(parts, k, metric)
    return D, I, missing


def run_scatter_gather(queries: np.ndarray, searches: Sequence[Search], k: int, merge: Merge, metric: str = "ip",
                       timeout: float = 120.0, **run_kwargs: Any) -> tuple[np.ndarray, np.ndarray, list[int], Any]:
    """Driver: rank r serves ``searches[r]``; returns rank 0's (D, I, missing) and the run."""
    res = cluster.run(_sg_rank, len(searches), args=(queries, list(searches), k, merge, metric), timeout=timeout,
                      **run_kwargs)
    D, I, missing = res.values[0]
    return D, I, missing, res


def _sg_rank(comm: Comm, queries: np.ndarray, searches: list[Search], k: int, merge: Merge,
             metric: str) -> tuple[np.ndarray, np.ndarray, list[int]] | None:
    return scatter_gather(comm, queries, searches[comm.rank], k, merge, metric)


def lost_share(truth: np.ndarray, bounds: Sequence[tuple[int, int]], missing: Sequence[int]) -> float:
    """Share of the true top-k ids that live on the ``missing`` shards (blocks ``bounds``): with exact
    shards, recall@k of the partial answer is exactly 1 minus this."""
    truth = np.asarray(truth)
    lost = np.zeros(truth.shape, dtype=bool)
    for r in missing:
        lo, hi = bounds[r]
        lost |= (truth >= lo) & (truth < hi)
    return float(lost.mean())
