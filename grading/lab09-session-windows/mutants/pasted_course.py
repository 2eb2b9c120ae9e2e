# mutant: the chapter's windowing pasted and adapted by hand (streaming.WindowOperator, step, shuffle_by_key,
# global_max_time with the Spark "max" policy, collectives.all_to_all and recursive_doubling_allreduce):
# tumbling windows of size gap, an all-to-all of the events, then an all-reduce of the latest time read
# loses: sessions, emitted_at, late, edge_cases, interleavings, correct_process, one_message, frames
# says: session windows
# score-at-most: 50
_NONE = -2.0 ** 62  # "no event seen" in the watermark all-reduce


def _all_to_all(comm, blocks):
    K, r = comm.size, comm.rank
    out = [None] * K
    out[r] = blocks[r].copy()
    for s in range(1, K):
        dst, src = (r + s) % K, (r - s) % K
        out[src] = comm.sendrecv(blocks[dst], dst, src)
    return out


def _allreduce_max(comm, x):
    K, r = comm.size, comm.rank
    acc = x.copy()
    P = 1 << (K.bit_length() - 1)
    R = K - P
    if r < 2 * R:
        if r % 2 == 0:
            comm.send(acc, r + 1)
            return comm.recv(r + 1)
        acc = np.maximum(comm.recv(r - 1), acc)  # noqa: F821
        v = r // 2
    else:
        v = r - R
    mask = 1
    while mask < P:
        pv = v ^ mask
        peer = 2 * pv + 1 if pv < R else pv + R
        acc = np.maximum(comm.sendrecv(acc, peer, peer), acc)  # noqa: F821
        mask <<= 1
    if r < 2 * R:
        comm.send(acc, r - 1)
    return acc


def session_windows(comm, owned, part, step, time, key, value, n_steps, gap, delta):
    K = comm.size
    step, key = np.asarray(step, np.int64), np.asarray(key, np.int64)  # noqa: F821
    time, value = np.asarray(time, np.float64), np.asarray(value, np.float64)  # noqa: F821
    state, late_mark, watermark, dropped, seen, rows = {}, 0.0, 0.0, 0, None, []
    for i in range(int(n_steps)):
        now = step == i
        t, k, v = time[now], key[now], value[now]
        if len(t):
            seen = float(t.max()) if seen is None else max(seen, float(t.max()))
        packed = np.stack([t, k.astype(np.float64), v], axis=1)  # noqa: F821
        got = np.concatenate(_all_to_all(comm, [packed[k % K == j] for j in range(K)]))  # noqa: F821
        for tt, kk, vv in got:  # WindowOperator.process: tumbling windows of size gap
            start = tt - tt % gap
            if start + gap <= late_mark:
                dropped += 1
                continue
            acc = state.setdefault((start, int(kk)), [0, 0.0])
            acc[0] += 1
            acc[1] += vv
        last = i == int(n_steps) - 1
        done = sorted(w for w in state if last or w[0] + gap <= watermark)  # evict
        rows += [(i, kk, s, s + gap, *state.pop((s, kk))) for s, kk in done]
        top = float(_allreduce_max(comm, np.array([_NONE if seen is None else seen]))[0])  # noqa: F821
        late_mark = watermark  # advance
        if top != _NONE:
            watermark = max(watermark, top - delta)
    return rows, dropped
