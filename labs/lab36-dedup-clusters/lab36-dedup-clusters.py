# %% [markdown]
# # Lab 36: duplicate clusters without a coordinator
#
# Chapter 36 finds near-duplicate pages with MinHash and LSH over K ranks: band rows are shuffled to the
# owner of their bucket, the owners pair the pages that share a bucket, and the holder of each pair's
# smaller id fetches the other page and verifies its Jaccard similarity. Then the chapter stops being
# distributed: **every verified pair goes to rank 0**, which runs a union-find over all of them and
# broadcasts the removed ids, and every rank starts by learning **every page id of every rank** (the
# "directory"). On a crawl of billions of pages, with clusters of thousands of copies of one article,
# rank 0 would receive billions of pairs. This lab removes the coordinator: the clusters are found by a
# **distributed union-find** in which the verified pairs never leave the rank that verified them.
#
# **The contract.** Rank r of K holds some pages: their global ids `ids` (int64, in no particular
# order, not contiguous: any rank may hold any id, and a rank may hold none), their MinHash signatures
# `sigs` (shape (n_r, num_perm), uint32 or uint64: compute nothing from text) and their shingle sets,
# flattened as `set_vals[set_ptr[k]:set_ptr[k + 1]]` for the k-th page (each a sorted array of distinct
# uint64). `dedup_clusters(comm, ids, sigs, set_ptr, set_vals, bands, threshold)` returns, for each of
# the rank's pages in the order of `ids`, its **cluster label**: the smallest global id of its duplicate
# cluster (int64). The page whose label is its own id is the cluster's **keeper**; the others are removed.
#
# **The definition the grader computes on one machine** (the chapter's `reference_dedup`):
#
# 1. Band b of a page is `sigs[b * r:(b + 1) * r]` with r = num_perm / bands (contiguous rows, as in
#    the chapter). Two pages are a *candidate pair* when some band b is equal in all r entries.
# 2. A candidate pair is *verified* when J(A, B) = |A & B| / |A | B| >= `threshold` (a float division,
#    equality included). Pairs that LSH never proposes are never united, even above the threshold.
# 3. The clusters are the connected components of the verified pairs: a chain a ~ b ~ c puts a and c in
#    one cluster even when J(a, c) is far below the threshold. Each cluster is labelled by its smallest id.
#
# **The protocol you write** (B = K * b band rows per rank in the worst case):
#
# | step | what | rule the grader checks |
# |---|---|---|
# | band shuffle | each (band, page) row goes to the owner of its bucket, hash(band, values) mod K, with the page's id and **its holder** (no directory) | each row sent to **one** owner, never to every rank |
# | pairs | each owner pairs the distinct pages of each bucket and sends (i, j, holder of j) to the holder of i < j | |
# | verify | the holder of i fetches j's set from j's holder and keeps the pairs with J >= threshold | |
# | local union-find | each rank unites its own verified pairs: every page it touched gets a local root | **verified pairs never leave the rank** |
# | global rounds | label[v] lives at v's holder (initially v). Per round a rank asks the holders for the labels of the pages it touched, sends min label of each local component to the holders of its pages whose label is larger, holders keep the minimum; stop when no label fell anywhere | at most one (page, label) pair per touched page per round |
#
# Why it is exact: labels only fall, and each is the id of a page of the same cluster; at the fixed point
# every local component carries one label, and the local components overlap exactly along the cluster,
# so the whole cluster carries one label, which must be its smallest id. The number of rounds is the
# number of hops between ranks along the longest chain (plus one to notice nothing changed).
#
# **The cost.** The band shuffle moves at most one copy of the band rows, n_r * bands rows of r + 3
# words from rank r (not K - 1 copies, as an all-gather would). After verification a rank sends at most
# a few words per page it touched per round, however many pairs it verified: a cluster of m copies held
# on one rank costs the other ranks nothing, where the chapter's gather sends m(m - 1)/2 pairs to rank 0.
#
# **What the grader checks.** The labels equal its single-machine reference for K = 1, 2, 3, 5 and K larger
# than the number of pages, pages scattered over the ranks in random, reversed, uneven and single-rank
# layouts, empty ranks, uint32 and uint64 signatures, ids past 2^32, long chains of near duplicates
# whose links sit on different ranks, pairs exactly at the threshold, LSH misses, 2 real processes and
# seeded random cases; from its own byte counts, the band shuffle (a few near duplicates among many
# pages: at most one copy of the rows plus small messages), and that with a big cluster held on one
# rank no other rank receives more than a copy of the band rows plus small messages (no pair gathered
# anywhere). `scaleoutai.cases.dedup`, `scaleoutai.cases.minhash` and `scaleoutai.cases.webrag` (the
# chapter's code), `scaleoutai.ml.graph` (Chapter 13's connected components) and `scaleoutai.data.mapreduce`
# (Chapter 6's shuffle) cannot be imported in the grader; `scaleoutai.collectives` (`all_to_all`) can.

# %% tags=["parameters"]
K = 4  # smoke: 3
N_FAMILIES = 60  # smoke: 25
NUM_PERM = 32
BANDS = 16
THRESHOLD = 0.5
SEED = 36

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import all_to_all

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


# %%
def band_keys(sigs, bands):
    """(n, bands) uint64: one 64-bit key per (page, band), equal exactly when the band's r entries are
    equal (up to a 2^-64 collision) and different for the same values in different bands."""
    ### BEGIN SOLUTION
    sigs = np.asarray(sigs)
    n, width = sigs.shape
    if bands < 1 or width % bands:
        raise ValueError(f"num_perm={width} is not a multiple of bands={bands}")
    cols = sigs.astype(np.uint64).reshape(n, bands, width // bands)
    key = np.broadcast_to(np.arange(1, bands + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15), (n, bands)).copy()
    for c in range(cols.shape[2]):  # splitmix64 over the band index and its r values (arrays wrap silently)
        key ^= cols[:, :, c]
        key = (key ^ (key >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        key = (key ^ (key >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        key ^= key >> np.uint64(31)
    return key
    ### END SOLUTION


# %%
def local_roots(pairs):
    """Union-find over a rank's own verified pairs: {page: smallest page of its local component} for
    every page that occurs in a pair."""
    ### BEGIN SOLUTION
    up = {}

    def top(v):
        path = []
        while up.setdefault(v, v) != v:
            path.append(v)
            v = up[v]
        for w in path:  # path compression
            up[w] = v
        return v

    for edge in pairs:
        small, big = sorted(top(int(e)) for e in edge)
        if small != big:
            up[big] = small  # the smaller root wins, so a root is its component's minimum
    return {v: top(v) for v in list(up)}
    ### END SOLUTION


# %%
def dedup_clusters(comm, ids, sigs, set_ptr, set_vals, bands, threshold):
    """This rank's cluster labels (int64, one per page, in the order of ids): the smallest global id of
    the page's cluster, found without gathering pairs or ids anywhere."""
    ### BEGIN SOLUTION
    me, K = comm.rank, comm.size
    ids = np.array(ids, dtype=np.int64).reshape(-1)
    where = {int(v): k for k, v in enumerate(ids)}

    def exchange(parts, dtype, width):
        blocks = [np.asarray(p, dtype=dtype).reshape(-1, width) for p in parts]
        return all_to_all(comm, blocks)

    # 1. band shuffle: (key, page, holder) to the owner of the bucket
    keys = band_keys(sigs, bands).reshape(-1)
    rows = np.stack([keys, np.repeat(ids, bands).astype(np.uint64), np.full(len(keys), me, np.uint64)], axis=1)
    owner = np.remainder(keys, np.uint64(K)).astype(np.int64)
    mine = np.concatenate(exchange([rows[owner == q] for q in range(K)], np.uint64, 3))
    # 2. per bucket: the pair (i, j, holder of j) to the holder of i < j, and "send j to the holder of i" to j's
    mine = mine[np.lexsort((mine[:, 1].astype(np.int64), mine[:, 0]))]
    out = [list() for q in range(K)]
    cuts = np.flatnonzero(np.diff(mine[:, 0])) + 1 if len(mine) else []
    for bucket in np.split(mine, cuts):
        members = {int(p): int(h) for p, h in zip(bucket[:, 1].astype(np.int64), bucket[:, 2])}
        order = sorted(members)
        for x, i in enumerate(order):
            for j in order[x + 1:]:
                out[members[i]].append((0, i, j, members[j]))
                out[members[j]].append((1, j, members[i], 0))
    got = np.concatenate(exchange(out, np.int64, 4))
    todo = {(int(i), int(j), int(h)) for f, i, j, h in got if f == 0}
    ship = sorted({(int(dest), int(j)) for f, j, dest, _ in got if f == 1})
    # 3. the sets travel once per (page, verifier); verify at the holder of i
    packs = []
    for q in range(K):
        sent = [j for d, j in ship if d == q]
        pieces = [set_vals[set_ptr[where[j]]:set_ptr[where[j] + 1]] for j in sent]
        head = [len(sent)] + [x for j, y in zip(sent, pieces) for x in (j, len(y))]  # count, then (page, size)s
        packs.append(np.concatenate([np.asarray(head, np.uint64)] + [np.asarray(y, np.uint64) for y in pieces]))
    other = {}
    for buf in exchange(packs, np.uint64, 1):
        buf = buf.ravel()
        count = int(buf[0])
        at = 1 + 2 * count
        for j, size in buf[1:at].astype(np.int64).reshape(-1, 2).tolist():
            other[j] = buf[at:at + size]
            at += size

    def shingles(v):
        return set_vals[set_ptr[where[v]]:set_ptr[where[v] + 1]] if v in where else other[v]

    holder = {v: me for v in where}
    good = []
    for i, j, h in sorted(todo):
        holder[j] = h
        a, b = shingles(i), shingles(j)
        common = int(np.isin(a, b, assume_unique=True).sum())
        either = a.size + b.size - common
        if (common / either if either else 1.0) >= threshold:
            good.append((i, j))
    # 4. local union-find, then rounds: proposals to the holders, who push every fallen label to the ranks
    #    that touched the page (a proposal subscribes), with this rank's count of fallen labels in front
    root = local_roots(good)
    label = ids.copy()
    seen = {v: v for v in root}
    fans = {}
    first = True
    while True:
        low = {}
        for v in root:
            low[root[v]] = min(low.get(root[v], seen[v]), seen[v])
        props = [[(v, low[root[v]]) for v in root if holder[v] == q and (first or low[root[v]] < seen[v])]
                 for q in range(K)]
        fallen = {}
        for q, got in enumerate(exchange(props, np.int64, 2)):
            for v, lab in got.tolist():
                fans.setdefault(v, set()).add(q)
                if lab < label[where[v]]:
                    label[where[v]] = fallen[v] = lab
        push = [[(-1, len(fallen))] + [(v, lab) for v, lab in fallen.items() if q in fans[v]] for q in range(K)]
        total = 0
        for got in exchange(push, np.int64, 2):
            total += int(got[0, 1])
            seen.update((v, lab) for v, lab in got[1:].tolist())
        first = False
        if total == 0:
            return label
    ### END SOLUTION


# %%
def run_clusters(comm, ids, sigs, set_ptr, set_vals, bands, threshold):
    """What the grader calls on every rank: the labels as an int64 array, one per page of ids."""
    out = dedup_clusters(comm, np.asarray(ids, dtype=np.int64).reshape(-1), np.asarray(sigs),
                         np.asarray(set_ptr, dtype=np.int64).reshape(-1), np.asarray(set_vals, dtype=np.uint64).reshape(-1),
                         int(bands), float(threshold))
    return np.asarray(out, dtype=np.int64).reshape(-1)


# %% [markdown]
# Try it on the simulator. `families` builds pages as chains of near duplicates: each page of a chain
# replaces 8 of the previous page's 40 shingles (J = 32/48 = 0.67 with its neighbour, 24/56 = 0.43 two
# steps away), plus exact copies and singletons; ids are shuffled and every page goes to a random rank,
# so the links of a chain sit on different ranks. The check is a single-machine reference written here
# with plain Python loops: LSH candidates, verification, and connected components.

# %% tags=["demo"]
def families(n_fam, rng, size=40, step=8):
    sets = []
    for _ in range(n_fam):
        cur = np.unique(rng.integers(0, 2 ** 63, size=size, dtype=np.uint64))
        for _ in range(int(rng.integers(1, 6))):
            sets.append(cur)
            cur = np.unique(np.concatenate([rng.permutation(cur)[step:], rng.integers(0, 2 ** 63, size=step, dtype=np.uint64)]))
    return sets


def minhash_sigs(sets, num_perm, rng, dtype=np.uint32):
    a = rng.integers(1, 2 ** 31, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    c = rng.integers(0, 2 ** 63, size=num_perm, dtype=np.uint64)
    return np.stack([(s[:, None] * a[None, :] + c[None, :]).min(axis=0) for s in sets]).astype(dtype)  # mod 2^64


def one_machine(sets, sigs, gid, bands, threshold):
    r = sigs.shape[1] // bands
    buckets = {}
    for k in range(len(sets)):
        for b in range(bands):
            buckets.setdefault((b, sigs[k, b * r:(b + 1) * r].tobytes()), []).append(k)
    label = {int(g): int(g) for g in gid}
    edges = {(min(x, y), max(x, y)) for ks in buckets.values() for x in ks for y in ks if x != y}
    edges = [(x, y) for x, y in edges if len(np.intersect1d(sets[x], sets[y])) / len(np.union1d(sets[x], sets[y])) >= threshold]
    while True:  # min-label propagation to the fixed point: slow, obviously right
        changed = False
        for x, y in edges:
            m = min(label[gid[x]], label[gid[y]])
            changed |= m < max(label[gid[x]], label[gid[y]])
            label[gid[x]] = label[gid[y]] = m
        if not changed:
            return label


def split_worker(comm, parts, bands, threshold):
    return run_clusters(comm, *parts[comm.rank], bands, threshold)


def shards(sets, sigs, gid, holder, K):
    parts = []
    for q in range(K):
        ks = np.flatnonzero(holder == q)
        ptr = np.concatenate([[0], np.cumsum([len(sets[k]) for k in ks])]).astype(np.int64)
        vals = np.concatenate([sets[k] for k in ks]) if len(ks) else np.zeros(0, np.uint64)
        parts.append((gid[ks], sigs[ks], ptr, vals))
    return parts


try:
    rng = np.random.default_rng(SEED)
    sets = families(N_FAMILIES, rng)
    sigs = minhash_sigs(sets, NUM_PERM, rng)
    gid = rng.permutation(len(sets)).astype(np.int64) + 2 ** 32  # ids past 2^32, shuffled
    holder = rng.integers(0, K, size=len(sets))
    parts = shards(sets, sigs, gid, holder, K)
    res = cluster.run(split_worker, K, args=(parts, BANDS, THRESHOLD), timeout=120)
    want = one_machine(sets, sigs, gid, BANDS, THRESHOLD)
    for q in range(K):
        assert [want[int(g)] for g in parts[q][0]] == res.values[q].tolist(), f"rank {q}'s labels differ"
    keepers = sum(int((v == p[0]).sum()) for v, p in zip(res.values, parts))
    print(f"{len(sets)} pages, {keepers} keepers; bytes received per rank:", [s.bytes_received for s in res.stats])
except cluster.RankError as err:
    print("dedup_clusters failed:", err.summary)

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
