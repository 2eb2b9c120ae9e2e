# mutant: adds up n_r g_r but divides by K times its own shard's size (assumes equal shards): wrong for uneven shards
# loses: sharded
REPLACE = [
    ('    N = total[-1]\n', '    N = float(n * K)\n'),
]
