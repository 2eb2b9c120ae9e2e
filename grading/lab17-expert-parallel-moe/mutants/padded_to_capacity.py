# mutant: counts are not trusted for the sizes: every dispatch block is padded with zero rows to a fixed
# capacity (2 T_r rows, the most a rank can route anywhere), and the padding comes back too
# loses: traffic
# says: no padding to a capacity
REPLACE = [
    ('received = all_to_all(comm, [tokens[tok[dest == j]] for j in range(size)])',
     'received = all_to_all(comm, [_pad(tokens[tok[dest == j]], 2 * len(tokens)) for j in range(size)])'),
    ('np.add.at(y, tok[sel], gate[sel, None] * back[j])',
     'np.add.at(y, tok[sel], gate[sel, None] * back[j][:int(sel.sum())])'),
    ('outs = [np.empty_like(block) for block in received]',
     'outs = [np.zeros_like(block) for block in received]'),
]


def _pad(rows, cap):
    out = np.zeros((cap, rows.shape[1]), dtype=rows.dtype)  # noqa: F821
    out[:len(rows)] = rows
    return out
