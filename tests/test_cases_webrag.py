"""Chapter 36: chunking, sharded embedding and the fault-tolerant scatter-gather against exact search."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.cases import webrag as wr
from scaleoutai.collectives import block_bounds
from scaleoutai.serving import vectors as V


def _embed(texts: list[str], dim: int = 64) -> np.ndarray:
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for r, t in enumerate(texts):
        for w in t.lower().split():
            out[r, zlib.crc32(w.encode()) % dim] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


TEXTS = [f"page {i} talks about item{i % 7} and thing{i % 11} with word{i % 5}" for i in range(41)]


def _searches(base: np.ndarray, K: int, metric: str = "ip"):
    return [(lambda q, k, lo=lo, hi=hi: V.local_topk(q, base[lo:hi], lo, k, metric)) for lo, hi in block_bounds(len(base), K)]


def test_chunks_group_sentences_and_keep_their_page():
    text = "Title line.\nOne. Two. Three.\nFour and no stop"
    assert wr.sentences(text) == ["Title line.", "One.", "Two.", "Three.", "Four and no stop"]
    assert wr.chunk(text, 2) == ["Title line. One.", "Two. Three.", "Four and no stop"]
    chunks, owner = wr.chunk_corpus([text, "A. B."], [7, 9], 3)
    assert owner.tolist() == [7, 7, 9] and chunks[-1] == "A. B."
    with pytest.raises(ValueError, match="chunk size"):
        wr.chunk(text, 0)
    with pytest.raises(ValueError, match="one id per page"):
        wr.chunk_corpus([text], [1, 2])


@pytest.mark.parametrize("K", [1, 2, 3, 5, 50])
def test_sharded_embedding_equals_embedding_everything_at_once(K):
    got, res = wr.run_embed(TEXTS, K, _embed)
    np.testing.assert_array_equal(got, _embed(TEXTS))
    assert sum(s.messages_sent for s in res.stats) == 0  # embarrassingly parallel


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 45])
def test_scatter_gather_equals_the_unsharded_exact_index(K, metric):
    base, queries = _embed(TEXTS), _embed(["item3 thing4", "word2 page", "nothing here"])
    want = V.knn(queries, base, 6, metric)
    D, I, missing, _ = wr.run_scatter_gather(queries, _searches(base, K, metric), 6, V.merge_topk, metric)
    assert missing == []
    np.testing.assert_array_equal(I, want[1])
    np.testing.assert_array_equal(D, want[0])


@pytest.mark.parametrize("crash_at", [0, 1])
def test_a_crashed_shard_is_named_and_recall_drops_by_its_share(crash_at):
    base, queries = _embed(TEXTS), _embed([f"item{i} thing{i}" for i in range(7)])
    K, k = 4, 5
    truth = V.knn(queries, base, k, "ip")[1]
    D, I, missing, _ = wr.run_scatter_gather(queries, _searches(base, K), k, V.merge_topk,
                                             faults=cluster.Faults(crash={2: crash_at}))
    assert missing == [2]
    share = wr.lost_share(truth, block_bounds(len(base), K), missing)
    assert 0 < share < 1 and V.recall_at_k(I, truth) == pytest.approx(1 - share, abs=1e-12)
    lo, hi = block_bounds(len(base), K)[2]
    assert not np.any((I >= lo) & (I < hi))


def test_a_lost_answer_is_reported_like_a_crash():
    base, queries = _embed(TEXTS), _embed(["item1"])
    _, _, missing, _ = wr.run_scatter_gather(queries, _searches(base, 3), 4, V.merge_topk,
                                             faults=cluster.Faults(drop={1: {0}}))
    assert missing == [1]
