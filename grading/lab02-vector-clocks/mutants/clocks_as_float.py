# mutant: the clocks come back as a float64 array instead of integers
# loses: clocks
# says: integer
REPLACE = [
    ('return np.array(out, dtype=np.int64).reshape(len(events), comm.size)',
     'return np.array(out, dtype=np.float64).reshape(len(events), comm.size)'),
]
