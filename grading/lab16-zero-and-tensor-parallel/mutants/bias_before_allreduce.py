# mutant: every rank adds b2 to its partial output before the all-reduce, so y holds K copies of b2
# loses: tp_sim, tp_process, tp_bytes
# says: rank 0's output y
REPLACE = [
    ('    partial = (gelu(x @ W1_shard + b1_shard) @ W2_shard).astype(x.dtype, copy=False)\n'
     '    return ring_allreduce(comm, partial) + b2\n',
     '    partial = (gelu(x @ W1_shard + b1_shard) @ W2_shard + b2).astype(x.dtype, copy=False)\n'
     '    return ring_allreduce(comm, partial)\n'),
]
