# mutant: the chapter's parameter server pasted and adapted by hand: owner_of's hash sharding over the members
# (key * golden >> 32 mod M), train_worker's request per server and clock, serve_shard's BSP branch (pushes of a
# clock summed in worker order, then SGD on the pushed rows), rows made on first pull; the chapter's membership
# is fixed, so all S servers serve from clock 0 and nothing moves
# loses: ring, final_rows, pulls_current, routing, migration, sparse, correct_process
# says: the lab asks for heavy-ball momentum
# score-at-most: 50
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # noqa: F821


def ring_owner(keys, members, vnodes):
    members = np.asarray(members, dtype=np.int64)  # noqa: F821
    keys = np.asarray(keys, dtype=np.int64)  # noqa: F821
    h = (keys.astype(np.uint64) * _GOLDEN) >> np.uint64(32)  # noqa: F821
    return members[(h % np.uint64(len(members))).astype(np.int64)]  # noqa: F821


def _aggregate(parts, d, dtype):
    keys = np.concatenate([k for k, _ in parts]) if parts else np.zeros(0, np.int64)  # noqa: F821
    if not len(keys):
        return keys, np.zeros((0, d), dtype)  # noqa: F821
    uk, inv = np.unique(keys, return_inverse=True)  # noqa: F821
    g = np.zeros((len(uk), d), dtype)  # noqa: F821
    np.add.at(g, inv, np.concatenate([x for _, x in parts]))  # noqa: F821
    return uk, g


def serve(comm, S, join, vnodes, W, T, d, dtype, lr, mu, seed):
    rows = {}
    for c in range(T + 1):
        buffered, pending = [], []
        for k in range(W):
            kind, _, pk, qk, g = unpack(comm.recv(S + k), d, dtype)  # noqa: F821
            buffered.append((pk.copy(), g.copy()))
            pending.append(qk.copy())
        keys, g = _aggregate(buffered, d, dtype)
        for key, row in zip(keys, g):
            rows[int(key)] = rows[int(key)] - lr * row
        if c == T:
            break
        for k in range(W):
            out = np.empty((len(pending[k]), d), dtype)  # noqa: F821
            for i, key in enumerate(pending[k]):
                if int(key) not in rows:
                    rows[int(key)] = init_rows([key], d, seed, dtype)[0]  # noqa: F821
                out[i] = rows[int(key)]
            comm.send(out, S + k)
    keys = sorted(rows)
    return np.array([rows[key] for key in keys], dtype=dtype).reshape(len(keys), d)  # noqa: F821


def work(comm, S, join, vnodes, users, items, r, batches, n_users, d, dtype):
    W, k = comm.size - S, comm.rank - S
    T, B = batches.shape
    lo, hi = block_range(B, W, k)  # noqa: F821
    r = np.asarray(r).astype(dtype)  # noqa: F821
    sse = np.zeros(T)  # noqa: F821
    push_keys, push_g = np.zeros(0, np.int64), np.zeros((0, d), dtype)  # noqa: F821
    for c in range(T + 1):
        if c < T:
            idx = batches[c][lo:hi]
            keys, inv = np.unique(np.concatenate([users[idx], n_users + items[idx]]), return_inverse=True)  # noqa: F821
        else:
            keys = np.zeros(0, np.int64)  # noqa: F821
        kind = REQUEST if c < T else DONE  # noqa: F821
        own, push_own = ring_owner(keys, list(range(S)), vnodes), ring_owner(push_keys, list(range(S)), vnodes)
        pulls = [keys[own == j] for j in range(S)]
        for j in range(S):
            comm.send(pack(kind, c, push_keys[push_own == j], pulls[j], push_g[push_own == j]), j)  # noqa: F821
        if c == T:
            break
        rows = np.empty((len(keys), d), dtype)  # noqa: F821
        for j in range(S):
            rows[np.searchsorted(keys, pulls[j])] = comm.recv(j)  # noqa: F821
        err, g = batch_gradient(rows, inv[:len(idx)], inv[len(idx):], r[idx], B)  # noqa: F821
        sse[c] = err
        push_keys, push_g = keys, g
    return sse
