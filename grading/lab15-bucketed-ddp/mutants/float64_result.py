# mutant: hierarchical_allreduce hands back float64 tensors for float32 gradients (the sums are right)
# loses: allreduce
# says: dtype
REPLACE = [
    ('unpacked[name] = total[lo:hi].reshape(grads[name].shape)',
     'unpacked[name] = np.array(total[lo:hi].reshape(grads[name].shape), dtype=float)'),
]
