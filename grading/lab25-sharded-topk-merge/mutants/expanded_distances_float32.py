# mutant: distances as ||q||^2 - 2 q.x + ||x||^2 in the input's dtype: exact on integer-valued vectors, loses
# the digits of float32 vectors far from 0
# loses: distances
# says: loses the digits
REPLACE = [("        gap = shard - q\n        dist = (gap * gap).sum(axis=1)",
            "        dist = (q * q).sum() - 2 * (shard @ q) + (shard * shard).sum(axis=1)")]
