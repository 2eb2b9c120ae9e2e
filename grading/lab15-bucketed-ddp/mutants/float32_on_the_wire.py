# mutant: halves the traffic by sending every bucket as float32 and casting the sum back (float64 loses digits)
# loses: allreduce, train_sim, train_process
# says: float64
REPLACE = [
    ('flat = ring_allreduce(comm, np.concatenate([grads[name].ravel() for name in bucket]))',
     'packed = np.concatenate([grads[name].ravel() for name in bucket])\n'
     '        flat = ring_allreduce(comm, packed.astype(np.float32)).astype(packed.dtype)'),
]
