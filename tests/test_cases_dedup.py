"""Chapter 36: MinHash, LSH banding and the distributed near-duplicate detection against the references."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.cases import dedup as dd
from scaleoutai.datasets.text import web_corpus

DTYPES = [np.uint32, np.uint64]


def _pair(j_target: float, size: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """Two hashed sets of ``size`` elements sharing m of them, so J = m / (2 size - m) ~ j_target."""
    m = int(round(2 * size * j_target / (1 + j_target)))
    words = [f"w{seed}-{i}" for i in range(2 * size - m)]
    a, b = dd.hash_shingles(words[:size]), dd.hash_shingles(words[size - m:])
    return a, b, m / (2 * size - m)


@pytest.fixture(scope="module")
def pages():
    c = web_corpus(80, seed=3)
    texts = [dd.clean(d, set(c.boilerplate)) for d in c.docs]
    return c, texts, [dd.shingle_set(t) for t in texts]


@pytest.mark.parametrize("dtype", DTYPES)
def test_minhash_estimate_is_unbiased_within_four_sigma_over_seeds(dtype):
    a, b, J = _pair(0.4)
    assert dd.jaccard(a, b) == pytest.approx(J, abs=1e-12)
    num_perm, seeds = 64, 200
    est = [dd.estimate_jaccard(dd.minhash(a, p), dd.minhash(b, p))
           for p in (dd.permutations(num_perm, s, dtype) for s in range(seeds))]
    sigma = np.sqrt(J * (1 - J) / (num_perm * seeds))
    assert abs(np.mean(est) - J) < 4 * sigma
    assert np.std(est) == pytest.approx(np.sqrt(J * (1 - J) / num_perm), rel=0.25)  # the variance J(1-J)/num_perm


def test_lsh_candidate_probability_follows_the_s_curve():
    bands, rows, seeds = 8, 4, 300
    for target in (0.2, 0.4, 0.55, 0.7, 0.9):
        a, b, J = _pair(target, seed=int(target * 100))
        hits = 0
        for s in range(seeds):
            p = dd.permutations(bands * rows, s)
            hits += bool(dd.lsh_candidates(np.stack([dd.minhash(a, p), dd.minhash(b, p)]), bands))
        want = dd.s_curve(J, bands, rows)
        assert abs(hits / seeds - want) < 4 * np.sqrt(max(want * (1 - want), 1e-3) / seeds) + 1e-9, (J, hits, want)
    assert dd.lsh_threshold(32, 4) == pytest.approx((1 / 32) ** 0.25)
    assert dd.choose_bands(128, 0.5) in {(b, 128 // b) for b in (16, 32)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_distributed_dedup_equals_reference_for_every_world_size(pages, K, dtype):
    c, _, sets = pages
    want = dd.reference_dedup(sets, 0.5, 64, 16, seed=2, dtype=dtype)
    got = dd.run_dedup(sets, K, 0.5, 64, 16, seed=2, dtype=dtype)  # 80 pages: uneven blocks for K = 3
    np.testing.assert_array_equal(got.kept, want.kept)
    np.testing.assert_array_equal(got.removed, want.removed)
    assert got.candidates == want.candidates and got.verified == want.verified
    assert len(want.removed) > 5 and set(want.removed.tolist()) <= set(np.flatnonzero(c.source >= 0).tolist())


def test_more_ranks_than_pages_leaves_empty_shards_and_the_same_result(pages):
    c, _, sets = pages
    few = [sets[i] for i in range(len(sets)) if c.family()[i] in set(c.family()[:8].tolist())]
    want = dd.reference_dedup(few, 0.5)
    got = dd.run_dedup(few, len(few) + 3, 0.5)
    assert len(want.removed) >= 1 and got.candidates == want.candidates
    np.testing.assert_array_equal(got.kept, want.kept)


def test_uneven_and_empty_shards_give_the_same_result(pages):
    _, _, sets = pages
    want = dd.reference_dedup(sets, 0.5)
    for bounds in ([(0, 0), (0, 7), (7, 66), (66, 80)], [(0, 79), (79, 80), (80, 80)]):
        got = dd.run_dedup(sets, len(bounds), 0.5, bounds=bounds)
        np.testing.assert_array_equal(got.kept, want.kept)
        assert [s["docs"] for s in got.stats] == [hi - lo for lo, hi in bounds]


def test_empty_pages_and_a_single_page():
    sets = [np.zeros(0, np.uint64), dd.shingle_set("a b c d e f g"), np.zeros(0, np.uint64),
            dd.shingle_set("a b c d e f g")]
    want = dd.reference_dedup(sets, 0.9)
    assert want.kept.tolist() == [0, 1] and want.verified == {(0, 2), (1, 3)}  # two empty sets are identical
    got = dd.run_dedup(sets, 3, 0.9)
    assert got.kept.tolist() == [0, 1]
    assert dd.run_dedup(sets[1:2], 2, 0.5).kept.tolist() == [0]
    assert np.all(dd.minhash(sets[0], dd.permutations(8, dtype=np.uint64)) == np.iinfo(np.uint64).max)


def test_lsh_finds_what_all_pairs_finds_above_the_threshold(pages):
    c, _, sets = pages
    naive = dd.naive_dedup(sets, 0.5)
    ref = dd.reference_dedup(sets, 0.5, 128, 32)
    assert ref.verified <= naive.verified and len(naive.candidates) == 80 * 79 // 2
    assert len(ref.verified) >= 0.9 * len(naive.verified)  # P(miss) <= (1 - 0.5^4)^32 = 0.13 per pair at J = 0.5
    assert naive.verified <= c.planted_pairs()  # no two unrelated pages are near duplicates


@pytest.mark.parametrize("dtype,scheme", [(np.uint32, "affine32"), (np.uint64, "affine64")])
def test_datasketch_gives_the_same_signatures_and_candidate_pairs(pages, dtype, scheme):
    from datasketch import MinHash, MinHashLSH

    _, texts, sets = pages
    perms = dd.permutations(128, 7, dtype)
    ours = dd.signatures(sets, perms)
    theirs = []
    for t in texts:
        m = MinHash(num_perm=128, permutations=perms, scheme=scheme)
        m.update_batch([g.encode() for g in dd.shingles(t)])
        theirs.append(m)
    np.testing.assert_array_equal(np.stack([m.hashvalues for m in theirs]), ours)
    lsh = MinHashLSH(threshold=0.5, num_perm=128, params=(32, 4))
    for i, m in enumerate(theirs):
        lsh.insert(i, m)
    pairs = {(min(i, j), max(i, j)) for i, m in enumerate(theirs) for j in lsh.query(m) if j != i}
    assert pairs == dd.lsh_candidates(ours, 32) and len(pairs) > 5
    assert theirs[0].jaccard(theirs[1]) == dd.estimate_jaccard(ours[0], ours[1])


def test_dedup_runs_on_real_processes():
    c = web_corpus(30, seed=5)
    sets = [dd.shingle_set(dd.clean(d, set(c.boilerplate))) for d in c.docs]
    got = dd.run_dedup(sets, 2, 0.5, backend="process", timeout=120, quiet=True)
    np.testing.assert_array_equal(got.kept, dd.reference_dedup(sets, 0.5).kept)


def test_a_crashed_rank_fails_the_run_and_a_rerun_gives_the_same_answer(pages):
    _, _, sets = pages
    with pytest.raises(cluster.RankError):
        dd.run_dedup(sets, 3, 0.5, faults=cluster.Faults(crash={1: 2}))
    np.testing.assert_array_equal(dd.run_dedup(sets, 3, 0.5).kept, dd.reference_dedup(sets, 0.5).kept)


def test_clean_and_shingles():
    text = "Site | Home\n  The  capital of X is Y.  \n\nCopyright Site"
    assert dd.clean(text, {"Site | Home", "Copyright Site"}) == "The capital of X is Y."
    assert dd.shingles("A b c", 5) == ["a b c"] and dd.shingles("", 5) == []
    assert dd.shingles("a b a b a b", 2) == ["a b", "b a"]
    h = dd.shingle_set("one two three four five six")
    assert h.dtype == np.uint64 and np.all(np.diff(h.astype(np.float64)) > 0) and len(h) == 2


def test_clear_value_errors():
    with pytest.raises(ValueError, match="divisible by bands"):
        dd.reference_dedup([np.zeros(0, np.uint64)], 0.5, num_perm=100, bands=32)
    with pytest.raises(ValueError, match="uint32 or uint64"):
        dd.permutations(16, dtype=np.int64)
    with pytest.raises(ValueError, match="num_perm"):
        dd.permutations(0)
    with pytest.raises(ValueError, match="shingle length"):
        dd.shingles("a b", 0)
    with pytest.raises(ValueError, match="threshold"):
        dd.choose_bands(128, 1.5)
    with pytest.raises(ValueError, match="contiguous"):
        dd.run_dedup([np.zeros(0, np.uint64)] * 4, 2, 0.5, bounds=[(0, 1), (2, 4)])
    with pytest.raises(ValueError, match="n_docs"):
        web_corpus(0)
    with pytest.raises(ValueError, match="dup_rate"):
        web_corpus(10, dup_rate=1.5)


def test_web_corpus_is_a_pure_function_of_its_seed_with_planted_structure():
    a, b, other = web_corpus(200, seed=11), web_corpus(200, seed=11), web_corpus(200, seed=12)
    assert a.docs == b.docs and a.questions == b.questions and a.docs != other.docs
    copies = np.flatnonzero(a.source >= 0)
    assert len(copies) == 60 and np.all(a.source[copies] < copies)  # copies follow their originals
    assert {a.kind[i] for i in copies} == {"exact", "near", "shingled"}
    for q, ans, g in zip(a.questions, a.answers, a.gold):
        assert a.source[g] == -1 and ans in a.docs[g]
    counts = np.bincount(a.topic)
    assert counts[0] == counts.max()  # the power-law mix: topic 0 is the most common
    assert all(sum(line in d.splitlines() for d in a.docs) >= 10 for line in a.boilerplate[:3])
