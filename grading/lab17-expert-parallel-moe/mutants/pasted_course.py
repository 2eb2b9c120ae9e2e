# mutant: the course's expert-parallel layer (moe_forward_ep with _router, _route, _slots and _gather_rows of
#   scaleoutai.parallel.moe / moe_dense) copied and adapted by hand to the lab's signature: top-2 with the
#   library's capacity C = ceil(1.25 * 2T / E), GShard slot order, drops, gates P[t, e] (not renormalised),
#   counts all-gathered, rows and (expert, slot) tags all-to-all'd; the owner map is the lab's
# loses: correct_sim, ties, correct_process, traffic, own_code
# says: the lab asks for dropless top-2
# score-at-most: 50
import math


def moe_dropless_ep(comm, tokens, router_W, owner, experts_shard):
    K, rank, k, cf = comm.size, comm.rank, 2, 1.25
    E = router_W.shape[1]
    owner = np.asarray(owner)  # noqa: F821
    z = tokens @ router_W
    P = np.exp(z - z.max(axis=1, keepdims=True))  # noqa: F821
    P /= P.sum(axis=1, keepdims=True)
    top = np.argsort(-P, axis=1, kind="stable")[:, :k]  # noqa: F821
    counts = np.stack([np.bincount(top[:, c], minlength=E) for c in range(k)])  # noqa: F821
    counts_all = all_gather(comm, counts.reshape(1, -1)).reshape(K, k, E)  # noqa: F821
    P_sum = np.sum(all_gather(comm, P.sum(axis=0, keepdims=True)), axis=0)  # noqa: F821
    totals = counts_all.sum(axis=0)
    T = int(totals.sum()) // k
    base = np.cumsum(totals, axis=0) - totals + counts_all[:rank].sum(axis=0)  # noqa: F821
    cap = int(math.ceil(cf * k * T / E))
    f = totals.sum(axis=0) / (T * k)
    aux_loss = float(E * np.sum(f * P_sum / T))  # noqa: F821
    load = np.minimum(totals.sum(axis=0), cap)  # noqa: F821
    pos = np.empty(top.shape, dtype=np.int64)  # noqa: F821
    for c in range(k):
        onehot = top[:, c][:, None] == np.arange(E)  # noqa: F821
        before = np.cumsum(onehot, axis=0) - onehot + base[c]  # noqa: F821
        pos[:, c] = before[np.arange(len(tokens)), top[:, c]]  # noqa: F821
    keep = pos < cap
    gate = np.take_along_axis(P, top, axis=1)  # noqa: F821
    sel = [np.nonzero(keep & (owner[top] == j)) for j in range(K)]  # noqa: F821
    rows = all_to_all(comm, [tokens[t] for t, _ in sel])  # noqa: F821
    tags = all_to_all(comm, [np.stack([top[t, c], pos[t, c]], axis=1) for t, c in sel])  # noqa: F821
    outs = {}
    for e, params_e in experts_shard.items():
        xe = np.zeros((int(load[e]), tokens.shape[1]), dtype=tokens.dtype)  # noqa: F821
        for rw, tg in zip(rows, tags):
            m = tg[:, 0] == e
            xe[tg[m, 1]] = rw[m]
        outs[e] = mlp_forward(params_e, xe)[0]  # noqa: F821
    blocks = []
    for tg in tags:
        res = np.empty((len(tg), tokens.shape[1]), dtype=tokens.dtype)  # noqa: F821
        for e in np.unique(tg[:, 0]):  # noqa: F821
            m = tg[:, 0] == e
            res[m] = outs[int(e)][tg[m, 1]]
        blocks.append(res)
    back = all_to_all(comm, blocks)  # noqa: F821
    y = np.zeros_like(tokens)  # noqa: F821
    for (t, c), out in zip(sel, back):
        np.add.at(y, t, gate[t, c][:, None] * out)  # noqa: F821
    return y, aux_loss


from scaleoutai.collectives import all_gather  # noqa: E402
