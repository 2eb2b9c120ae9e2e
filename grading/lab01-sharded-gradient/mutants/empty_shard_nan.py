# mutant: local_gradient has no case for an empty shard: it divides by n = 0 (K > N, or an empty split)
# loses: local, sharded, loss, communication
REPLACE = [
    ('    if not n:\n        return 0.0, np.zeros(len(w), dtype=dt)\n', ''),
]
