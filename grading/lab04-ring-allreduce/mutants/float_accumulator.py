# mutant: adds each received chunk in float64 and casts back: exact for small integers, wrong for int64 beyond 2**53
# loses: correct_sim
# says: integer sums must be exact
REPLACE = [
    ('chunks[i] = chunks[i] + comm.recv(left)',
     'chunks[i] = (chunks[i] + comm.recv(left).astype(float)).astype(x.dtype)'),
]
