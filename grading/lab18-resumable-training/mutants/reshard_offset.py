# mutant: the overlap is cut from the old shard at the new block's offset, not the old shard's: right only when K' = K
# loses: reshard, checksum
REPLACE = [
    ('out[:, a - lo:z - lo] = part[:, a - entry["lo"]:z - entry["lo"]]',
     'out[:, a - lo:z - lo] = part[:, a - lo:z - lo]'),
]
