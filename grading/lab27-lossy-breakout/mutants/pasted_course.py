# mutant: the chapter's round engine (dai_rounds._rounds with dba, encode/decode and the recursive-doubling
# detector) pasted and adapted by hand onto LossyLink: right at loss 0, but the first lost message ends the run
# loses: solved_lossy, unsolvable, correct_process, channel, traffic_lossless, traffic_lossy
# says: retransmit
# score-at-most: 50
def _encode(msgs):
    flat = []
    for dst, src, kind, data in msgs:
        flat += [3 + len(data), dst, src, kind, *data]
    return np.array(flat, dtype=np.int64)  # noqa: F821


def _decode(a):
    out, at, a = [], 0, a.tolist()
    while at < len(a):
        n = a[at]
        out.append((a[at + 1], a[at + 2], a[at + 3], tuple(a[at + 4:at + 1 + n])))
        at += 1 + n
    return out


def _allreduce(link, x):
    K, r = link.size, link.rank
    acc = x.copy()
    P = 1 << (K.bit_length() - 1)
    R = K - P
    if r < 2 * R:
        if r % 2 == 0:
            link.send(acc, r + 1)
            return link.recv(r + 1)
        acc = link.recv(r - 1) + acc
        v = r // 2
    else:
        v = r - R
    mask = 1
    while mask < P:
        pv = v ^ mask
        peer = 2 * pv + 1 if pv < R else pv + R
        link.send(acc, peer)
        acc = link.recv(peer) + acc
        mask <<= 1
    if r < 2 * R:
        link.send(acc, r - 1)
    return acc


def lossy_breakout(comm, nb, k, loss, seed, max_rounds, linger):
    link = LossyLink(comm, loss, seed)  # noqa: F821
    bounds = block_bounds(len(nb), comm.size)  # noqa: F821
    owner = np.repeat(np.arange(comm.size), [b - a for a, b in bounds])  # noqa: F821
    mine = range(*bounds[comm.rank])
    peers = sorted({int(owner[j]) for i in mine for j in nb[i]} - {comm.rank})
    agents = {i: DBAAgent(i, nb, k, seed) for i in mine}  # noqa: F821
    inbox, status, r = {}, None, 0
    for r in range(max_rounds + 1):
        out = []
        for i, agent in agents.items():
            got = sorted(inbox.get(i, ()), key=lambda m: m[1])
            out += agent.start() if r == 0 else agent.round(r, got)
        viol = sum(a.violated for a in agents.values()) if r % 2 == 1 else 0
        total = _allreduce(link, np.array([len(out), 0, viol], dtype=np.int64))  # noqa: F821
        if r % 2 == 1 and int(total[2]) == 0:
            status = 1
            break
        inbox, remote = {}, {p: [] for p in peers}
        for m in out:
            if owner[m[0]] == comm.rank:
                inbox.setdefault(m[0], []).append(m)
            else:
                remote[int(owner[m[0]])].append(m)
        for p in peers:
            link.send(_encode(remote[p]), p)
        for p in peers:
            for m in _decode(link.recv(p)):
                inbox.setdefault(m[0], []).append(m)
    result = np.full(len(nb) + 2, -1, dtype=np.int64)  # noqa: F821
    result[:2] = (1 if status else 0), r
    if status:
        for i, a in agents.items():
            result[2 + i] = a.value
    return result
