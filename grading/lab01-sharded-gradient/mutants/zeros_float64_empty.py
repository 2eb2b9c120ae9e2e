# mutant: local_gradient returns float64 zeros for an empty shard whatever the data's dtype (np.zeros(d))
# loses: local
# says: expected float32
REPLACE = [
    ('return np.zeros_like(w, dtype=X_shard.dtype)', 'return np.zeros(len(w))'),
]
