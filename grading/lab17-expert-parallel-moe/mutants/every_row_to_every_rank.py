# mutant: sends every kept token row to every rank (all-gather traffic) and lets the owner pick its rows
# loses: traffic
import numpy as np


def moe_forward_ep(comm, tokens, router_W, experts_shard, k, capacity_factor):
    size, rank = comm.size, comm.rank
    n_experts = router_W.shape[1]
    owner_of = np.concatenate([np.full(len(b), j) for j, b in enumerate(np.array_split(np.arange(n_experts), size))])
    logits = tokens @ router_W
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    mine = np.stack([np.bincount(choice[:, c], minlength=n_experts) for c in range(k)])
    everyone = all_gather(comm, mine.reshape(1, -1)).reshape(size, k, n_experts)
    per_choice = everyone.sum(axis=0)
    cap = capacity(int(per_choice[0].sum()), n_experts, k, capacity_factor)
    # slots before mine: every earlier choice of every rank, and this choice of lower ranks
    taken = np.cumsum(per_choice, axis=0) - per_choice + everyone[:rank].sum(axis=0)
    slot = np.empty(choice.shape, dtype=np.int64)
    for c in range(k):
        seen = taken[c].copy()
        for t in range(len(tokens)):
            slot[t, c] = seen[choice[t, c]]
            seen[choice[t, c]] += 1
    kept = slot < cap
    gate = np.take_along_axis(probs, choice, axis=1)
    picks = [np.nonzero(kept & (owner_of[choice] == j)) for j in range(size)]
    rows_in = _gather_rows(comm, tokens, picks, size, rank)
    ids_in = all_to_all(comm, [choice[t, c] for t, c in picks])
    outs = []
    for rows, ids in zip(rows_in, ids_in):
        out = np.zeros_like(rows)
        for e in np.unique(ids):
            hit = ids == e
            out[hit] = mlp_forward(experts_shard[int(e)], rows[hit])[0]
        outs.append(out)
    back = all_to_all(comm, outs)
    y = np.zeros_like(tokens)
    for (t, c), out in zip(picks, back):
        np.add.at(y, t, gate[t, c][:, None] * out)  # with k = 2 one token may get two rows from one rank
    return y


def _gather_rows(comm, tokens, picks, size, rank):
    """Every rank sends all of its kept rows to every rank; each rank keeps the rows meant for it."""
    sent = [np.concatenate([tokens[t] for t, _ in picks]) if len(picks) else tokens[:0]] * size
    got = all_to_all(comm, sent)  # noqa: F821
    counts = all_to_all(comm, [np.array([len(t) for t, _ in picks])] * size)  # noqa: F821
    out = []
    for j in range(size):
        offsets = np.concatenate([[0], np.cumsum(counts[j])])
        out.append(got[j][offsets[rank]:offsets[rank + 1]])
    return out
