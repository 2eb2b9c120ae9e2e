# mutant: the chapter's distributed dedup (dedup.dedup with band_rows, _bucket_pairs, verify, _pack_sets) copied
#   and adapted by hand to the lab's signature; as the lab forbids its gather of every verified pair to rank 0,
#   each verified pair (i, j) instead lowers j's label to i at j's holder: pairwise, no transitive closure
# loses: keepers, chains, verified, small, process, random
# says: transitive closure
# score-at-most: 50
def _fmix64(h):
    with np.errstate(over="ignore"):  # noqa: F821
        h = h ^ (h >> np.uint64(33))  # noqa: F821
        h = h * np.uint64(0xFF51AFD7ED558CCD)  # noqa: F821
        h = h ^ (h >> np.uint64(33))  # noqa: F821
        h = h * np.uint64(0xC4CEB9FE1A85EC53)  # noqa: F821
        return h ^ (h >> np.uint64(33))  # noqa: F821


def _band_rows(sigs, ids, bands):
    n, num_perm = sigs.shape
    r = num_perm // bands
    out = np.empty((n * bands, 2 + r), dtype=np.uint64)  # noqa: F821
    out[:, 0] = np.tile(np.arange(bands, dtype=np.uint64), n)  # noqa: F821
    out[:, 1] = np.repeat(np.asarray(ids, dtype=np.uint64), bands)  # noqa: F821
    out[:, 2:] = sigs.reshape(n * bands, r)
    return out


def _bucket_pairs(rows):
    if len(rows) == 0:
        return set()
    key = np.delete(rows, 1, axis=1)  # noqa: F821
    _, label = np.unique(key, axis=0, return_inverse=True)  # noqa: F821
    order = np.lexsort((rows[:, 1], label.ravel()))  # noqa: F821
    label, ids = label.ravel()[order], rows[order, 1].astype(np.int64)  # noqa: F821
    edges = np.flatnonzero(np.diff(label)) + 1  # noqa: F821
    pairs = set()
    for start, stop in zip(np.concatenate([[0], edges]), np.concatenate([edges, [len(label)]])):  # noqa: F821
        if stop - start < 2:
            continue
        members = np.unique(ids[start:stop])  # noqa: F821
        pairs.update((int(a), int(b)) for i, a in enumerate(members) for b in members[i + 1:])
    return pairs


def _jaccard(a, b):
    inter = len(np.intersect1d(a, b, assume_unique=True))  # noqa: F821
    union = len(a) + len(b) - inter
    return inter / union if union else 1.0


def _pack_sets(sets):
    lens = np.array([len(s) for s in sets], dtype=np.uint64)  # noqa: F821
    return np.concatenate([np.array([len(sets)], np.uint64), lens] + [np.asarray(s, np.uint64) for s in sets])  # noqa: F821


def _unpack_sets(buf):
    n = int(buf[0])
    lens, out, at = buf[1:1 + n].astype(np.int64), [], 1 + n  # noqa: F821
    for m in lens:
        out.append(buf[at:at + m])
        at += int(m)
    return out


def dedup_clusters(comm, ids, sigs, set_ptr, set_vals, bands, threshold):
    K, me = comm.size, comm.rank
    ids = np.asarray(ids, dtype=np.int64)  # noqa: F821
    sets = [set_vals[set_ptr[k]:set_ptr[k + 1]] for k in range(len(ids))]
    holder = {int(i): r for r, got in enumerate(all_to_all(comm, [ids] * K)) for i in got}  # noqa: F821
    rows = _band_rows(np.asarray(sigs).astype(np.uint64), ids, bands)  # noqa: F821
    key = np.delete(rows, 1, axis=1)  # noqa: F821
    h = np.full(len(rows), 0x9E3779B97F4A7C15, dtype=np.uint64)  # noqa: F821
    for c in range(key.shape[1]):
        h = _fmix64(h ^ key[:, c])
    owner = (h % np.uint64(K)).astype(np.int64)  # noqa: F821
    got = all_to_all(comm, [rows[owner == r] for r in range(K)])  # noqa: F821
    local = _bucket_pairs(np.concatenate(got)) if got else set()  # noqa: F821
    out = [[] for _ in range(K)]
    for i, j in local:
        out[holder[i]].append((i, j))
    got = all_to_all(comm, [np.array(sorted(p), dtype=np.int64).reshape(-1, 2) for p in out])  # noqa: F821
    mine = sorted({(int(i), int(j)) for g in got for i, j in g})
    own = {int(i): s for i, s in zip(ids, sets)}
    want = sorted({j for _, j in mine if j not in own})
    asks = all_to_all(comm, [np.array([j for j in want if holder[j] == r], dtype=np.int64) for r in range(K)])  # noqa: F821
    replies = all_to_all(comm, [_pack_sets([own[int(j)] for j in a]) for a in asks])  # noqa: F821
    other = dict(own)
    for r, buf in enumerate(replies):
        asked = [j for j in want if holder[j] == r]
        other.update(zip(asked, _unpack_sets(buf)))
    good = sorted((i, j) for i, j in mine if _jaccard(other[i], other[j]) >= threshold)
    # no rank 0: each verified pair lowers the larger page's label at its holder
    got = all_to_all(comm, [np.array([(j, i) for i, j in good if holder[j] == r], dtype=np.int64).reshape(-1, 2)  # noqa: F821
                            for r in range(K)])
    label = {int(i): int(i) for i in ids}
    for g in got:
        for j, i in g:
            label[int(j)] = min(label[int(j)], int(i))
    return np.array([label[int(i)] for i in ids], dtype=np.int64)  # noqa: F821
