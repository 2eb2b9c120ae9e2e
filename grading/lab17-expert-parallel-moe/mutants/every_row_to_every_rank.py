# mutant: sends every kept token row to every rank (all-gather traffic) and lets the owner pick its rows
# loses: traffic
REPLACE = [
    ('rows_in = all_to_all(comm, [tokens[t] for t, _ in picks])',
     'rows_in = _gather_rows(comm, tokens, picks, size, rank)'),
]


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
