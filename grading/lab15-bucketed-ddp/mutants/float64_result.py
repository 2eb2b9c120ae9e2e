# mutant: bucketed_allreduce hands back float64 tensors for float32 gradients (the sums are right)
# loses: allreduce
# says: dtype
REPLACE = [
    ('summed[name] = flat[offset:offset + count].reshape(grads[name].shape)',
     'summed[name] = np.array(flat[offset:offset + count].reshape(grads[name].shape), dtype=float)'),
]
