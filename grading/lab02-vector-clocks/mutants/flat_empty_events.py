# mutant: returns np.array(out) without the reshape: a rank with no events returns shape (0,), not (0, K)
# loses: clocks
# says: shape (0,)
REPLACE = [
    ('return np.array(out, dtype=np.int64).reshape(len(events), comm.size)', 'return np.array(out, dtype=np.int64)'),
]
