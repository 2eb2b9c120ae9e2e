"""Lab 36: duplicate clusters without a coordinator. Each rank holds only its pages (ids, MinHash
signatures, shingle sets); the grader checks every rank's labels against its single-machine reference
(the chapter's LSH candidates, exact verification, connected components, smallest id per cluster) and,
from its own byte counts, the band shuffle (one copy of the rows, not an all-gather) and that the
verified pairs of a big cluster held on one rank never reach another rank (no coordinator)."""
from __future__ import annotations

import numpy as np

from scaleoutai.cases import dedup as dd
from scaleoutai.collectives import block_bounds
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after

# (kind, K, chains, copies, singles, layout, dtype, num_perm, bands, first id, note). chains: lengths of chains of
# near duplicates (J = 32/48 between neighbours, 24/56 two apart: LSH candidates that fail verification), a
# negative length a chain of pages at J = 23/57 = 0.40 (candidates, but separate clusters);
# copies: sizes of groups of exact copies; layout: how pages go to ranks ("random", "blocks" of ids, "reversed"
# blocks, "skew" 1:2:4.. with rank 0 empty, "links": consecutive pages of a chain on consecutive ranks, "one:h")
CASES = [
    ("keepers", 1, [3, 4, 2, 5], [2], 6, "random", "uint32", 32, 16, 0, ""),
    ("keepers", 2, [4, 3, 3, 2, 5, -2], [3], 8, "random", "uint64", 32, 16, 0, ""),
    ("keepers", 3, [5, 4, 3, 3, 2], [2, 2], 10, "blocks", "uint32", 32, 8, 0, ", contiguous blocks of ids"),
    ("keepers", 5, [4, 4, 3, 6, 2, 3], [3], 12, "skew", "uint64", 32, 16, 3 * 2 ** 32 + 5,
     ", ranks holding 0:1:2:4:8 shares (rank 0 empty), ids past 2^32"),
    ("keepers", 4, [3, 5, 4, 2, 3], [4], 9, "reversed", "uint32", 64, 16, 0, ", rank 0 holds the largest ids"),
    ("keepers", 3, [6, 3, 4], [2], 5, "random", "uint64", 16, 4, 2 ** 40, ", ids past 2^40, r = 4 rows per band"),
    ("chains", 3, [9, 7, 8], [], 4, "links", "uint32", 32, 16, 0, ": chains of 7-9 pages, each link on another rank"),
    ("chains", 5, [12, 10, 6, -3], [2], 3, "links", "uint64", 32, 16, 0, ": chains of up to 12 pages over 5 ranks"),
    ("chains", 4, [8, 8, 5], [], 6, "random", "uint32", 32, 8, 2 ** 33, ": long chains, pages on random ranks"),
    ("verified", 3, [5, 4, 4, 3, -2, -3], [], 6, "random", "uint32", 32, 16, 0, ": links exactly at J = threshold = 0.5"),
    ("verified", 4, [6, 6, 5, 4], [3], 8, "random", "uint64", 16, 2, 0,
     ": b = 2 bands of r = 8 rows, so LSH proposes few of the pairs above the threshold"),
    ("small", 5, [3], [], 1, "random", "uint32", 32, 16, 0, ": K = 5 > n = 4 pages"),
    ("small", 4, [3, 2], [], 0, "one:2", "uint64", 32, 16, 0, ": every page on rank 2, the others empty"),
    ("small", 5, [4], [], 0, "links", "uint32", 16, 8, 0, ": K = 5 > n = 4 pages, one chain"),
    ("small", 3, [], [], 0, "random", "uint32", 32, 16, 0, ": no pages at all"),
    ("process", 2, [4, 3, 5, 2], [2], 6, "random", "uint64", 32, 16, 0, ""),
    ("shuffle", 4, [2, 2], [], 90, "random", "uint32", 32, 16, 0, ": many distinct pages, two near-duplicate pairs"),
    ("shuffle", 5, [2], [2], 100, "random", "uint64", 32, 16, 0, ": many distinct pages, a pair and a copy"),
    ("edges", 4, [], [80], 24, "big:2", "uint32", 16, 2, 0, ": 80 copies of one page on rank 2, 24 other pages"),
    ("edges", 3, [], [64], 20, "big:1", "uint64", 16, 2, 0, ": 64 copies of one page on rank 1, 20 other pages"),
]
PROPERTY = 4  # seeded random cases: K, chains, copies, layout, dtype, bands and first id all drawn
UNIMPORTABLE = ("scaleoutai.cases.dedup", "scaleoutai.cases.minhash", "scaleoutai.cases.webrag", "scaleoutai.ml.graph",
                "scaleoutai.data.mapreduce")  # the chapter's dedup, Chapter 13's components, Chapter 6's shuffle
MSGS = 24  # exchanges allowed for small messages (pairs, requests, replies, labels, counts) per ordered pair of ranks
PER_MSG = envelope_bytes(2) + 16
ASKS = ("the lab asks for the transitive closure over the ranks (a chain a ~ b ~ c is one cluster labelled by its "
        "smallest id, found by a distributed union-find); uniting only each verified pair does not")


def _pages(rng, chains, copies, singles, size, step):
    """Sets in generation order (chains first, link after link), and a family number per page."""
    sets, fam = [], []
    for f, length in enumerate(chains):
        cur = np.unique(rng.integers(0, 1 << 63, size=size, dtype=np.uint64))
        swap = step if length > 0 else size * 3 // 7  # a negative length: links at J = 0.4, LSH candidates only
        for _ in range(abs(length)):
            sets.append(cur)
            fam.append(f)
            cur = np.unique(np.concatenate([rng.permutation(cur)[swap:],
                                            rng.integers(2 ** 63, 2 ** 64 - 1, size=swap, dtype=np.uint64)]))
    for f, m in enumerate(copies):
        one = np.unique(rng.integers(0, 2 ** 64 - 1, size=size, dtype=np.uint64))
        sets += [one] * m
        fam += [len(chains) + f] * m
    for _ in range(singles):
        sets.append(np.unique(rng.integers(0, 2 ** 64 - 1, size=size, dtype=np.uint64)))
        fam.append(-1)
    return sets, np.array(fam, dtype=np.int64)


def _layout(rng, how, n, K, gid, fam):
    if how == "random":
        return rng.integers(0, K, size=n)
    if how == "links":
        return np.arange(n) % K
    if how.startswith("one:"):
        return np.full(n, int(how[4:]))
    if how.startswith("big:"):
        big = np.bincount(fam[fam >= 0]).argmax()
        return np.where(fam == big, int(how[4:]), rng.integers(0, K, size=n))
    rank_of = np.empty(n, dtype=np.int64)
    order = np.argsort(gid)
    weights = [0] + [2 ** r for r in range(K - 1)] if how == "skew" else [1] * K
    cuts = np.concatenate([[0], np.cumsum(weights)]) * n // sum(weights)
    for r in range(K):
        rank_of[order[cuts[r]:cuts[r + 1]]] = K - 1 - r if how == "reversed" else r
    return rank_of


def _add(p: Plan, rng, cid: str, spec: tuple) -> None:
    kind, K, chains, copies, singles, how, dtype, num_perm, bands, first, note = spec
    thr = 0.5
    size, step = (30, 10) if kind == "verified" and "exactly" in note else (40, 8)
    sets, fam = _pages(rng, chains, copies, singles, size, step)
    n = len(sets)
    order = rng.permutation(n)
    sets, fam = [sets[k] for k in order] if how != "links" else sets, fam[order] if how != "links" else fam
    gid = rng.permutation(n).astype(np.int64) + first
    holder = _layout(rng, how, n, K, gid, fam)
    sigs = dd.signatures(sets, dd.permutations(num_perm, int(rng.integers(1, 10 ** 6)), dtype)) if n else \
        np.zeros((0, num_perm), dtype)
    cand = dd.lsh_candidates(sigs, bands, ids=gid) if n else set()
    by_id = {int(g): s for g, s in zip(gid, sets)}
    root = dd.clusters([int(g) for g in gid], dd.verify(cand, by_id, thr))
    ids, sg, ptrs, vals = [], [], [], []
    for q in range(K):
        on_q = np.flatnonzero(holder == q)
        ids.append(gid[on_q])
        sg.append(np.ascontiguousarray(sigs[on_q]))
        ptrs.append(np.concatenate([[0], np.cumsum([len(sets[k]) for k in on_q])]).astype(np.int64))
        vals.append(np.concatenate([sets[k] for k in on_q]) if len(on_q) else np.zeros(0, np.uint64))
    backend = "process" if kind == "process" else "sim"
    sizes = [len(i) for i in ids]
    label = (f"K={K}, n={n} pages (ranks hold {min(sizes)}..{max(sizes)}), {dtype} signatures of {num_perm}, "
             f"b={bands} bands, {'simulator' if backend == 'sim' else '2 real processes'}{note}")
    rows = n * bands * (num_perm // bands + 3) * 8  # one copy of the band rows, r values + band, id, holder
    extra = sum(8 * (len(by_id[i]) + len(by_id[j])) + 96 for i, j in cand)  # the candidates' pairs and sets
    case = Case(id=cid, fn="run_clusters", label=label, world_size=K, backend=backend,
                timeout=40 if backend == "process" else 15,
                data={"kind": kind, "ref": [np.array([root[int(g)] for g in i], dtype=np.int64) for i in ids],
                      "rows": rows, "extra": extra, "big": int(how[4:]) if how.startswith("big:") else -1,
                      "pairwise": _pairwise(ids, cand, by_id, thr)})
    p.add_in_order(case, [("ids", ids), ("sigs", sg), ("set_ptr", ptrs), ("set_vals", vals), ("=", bands), ("=", thr)])


def _pairwise(ids, cand, by_id, thr):
    """Each page labelled by its smallest verified partner (no transitive closure), to name that mistake."""
    low = {int(g): int(g) for i in ids for g in i}
    for i, j in dd.verify(cand, by_id, thr):
        low[j] = min(low[j], i)
    return [np.array([low[int(g)] for g in i], dtype=np.int64) for i in ids]


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(CASES):
        _add(p, rng, f"c{i:02d}", spec)
    for i in range(PROPERTY):
        K = int(rng.integers(2, 7))
        chains = [int(x) for x in rng.integers(2, 8, size=int(rng.integers(3, 7)))] + [-2, -3][:int(rng.integers(0, 3))]
        copies = [int(x) for x in rng.integers(2, 4, size=int(rng.integers(0, 3)))]
        how, dtype = str(rng.choice(["random", "links", "skew", "reversed"])), str(rng.choice(["uint32", "uint64"]))
        bands = int(rng.choice([8, 16]))
        first = int(rng.choice([0, int(rng.integers(2 ** 31, 2 ** 45))]))
        _add(p, rng, f"p{i}", ("random", K, chains, copies, int(rng.integers(0, 12)), how, dtype, 32, bands, first,
                               f": seeded random case ({how} layout)"))
    return p


def _labels(res: CaseResult) -> None:
    c = res.case
    wrong, total, closure = 0, 0, True
    for r in range(c.world_size):
        want = c.data["ref"][r]
        got = res.value(r, "labels (run_clusters's int64 array)", dtype=np.int64, shape=want.shape)
        wrong += int((got != want).sum())
        total += len(want)
        closure &= bool(np.array_equal(got, c.data["pairwise"][r]))
    if wrong:
        why = (ASKS if closure else "each label is the smallest global id of the page's cluster: the connected "
               "components of the LSH candidate pairs (contiguous bands) whose exact Jaccard is >= the threshold")
        raise Fail(f"{wrong} of {total} labels differ from the single-machine reference ({why})")


def labels(res: CaseResult):
    _labels(res)
    return 1.0, ""


def shuffle(res: CaseResult):
    """All ranks together send at most one copy of the band rows plus the candidates and small messages."""
    graded_after(lambda: _labels(res), "every label")
    c, K = res.case, res.case.world_size
    sent = sum(res.stats(r)["bytes_sent"] for r in range(K))
    top = c.data["rows"] + c.data["extra"] + MSGS * K * (K - 1) * PER_MSG
    if sent > top:
        raise Fail(f"the ranks sent {sent} B in all; one copy of the band rows (r values, band, id and holder per "
                   f"row), the candidate pairs, their sets and small messages are at most {top} B: send each band row "
                   f"to the owner of its bucket only, not to every rank")
    return 1.0, ""


def edges(res: CaseResult):
    """With a big cluster held on one rank, no other rank receives more than one copy of the rows plus small messages."""
    graded_after(lambda: _labels(res), "every label")
    c, K = res.case, res.case.world_size
    top = c.data["rows"] + MSGS * (K - 1) * PER_MSG
    for r in range(K):
        got = res.stats(r)["bytes_received"]
        if r != c.data["big"] and got > top:
            raise Fail(f"rank {r} received {got} B, more than a copy of the band rows and small messages ({top} B), "
                       f"though the big cluster's pages all sit on rank {c.data['big']}: the lab asks for a union-find "
                       f"without a coordinator, where verified pairs never leave the rank that verified them (unite "
                       f"them there, then exchange at most one label per page per round)")
    return 1.0, ""


def _kind(*kinds):
    return lambda c: c.data["kind"] in kinds


TESTS = [
    Test("keepers", "every page's label is its cluster's smallest id (K = 1, 2, 3, 4, 5, random, block, reversed and "
         "skewed layouts, uint32/uint64, ids past 2^32)", select=_kind("keepers"), check=labels),
    Test("chains", "chains of near duplicates whose links sit on different ranks are one cluster",
         select=_kind("chains"), check=labels),
    Test("verified", "pairs exactly at the threshold are united; pairs LSH does not propose are not",
         select=_kind("verified"), check=labels),
    Test("small", "K larger than the number of pages, empty ranks, no pages at all", select=_kind("small"),
         check=labels),
    Test("process", "the labels are right on 2 real processes", select=_kind("process"), check=labels),
    Test("random", "seeded random cases", select=_kind("random"), check=labels),
    Test("shuffle", "the band shuffle sends each row to one owner, not to every rank (the grader's byte counts)",
         select=_kind("shuffle"), check=shuffle),
    Test("edges", "no coordinator: a big cluster on one rank costs the other ranks nothing (the grader's byte counts)",
         select=_kind("edges"), check=edges),
]
