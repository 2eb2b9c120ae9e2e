# mutant: seeds the permutation with the seed alone: every epoch repeats epoch 0's order
# loses: spec, resume, reshuffled
# says: seed + epoch
REPLACE = [("order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)",
            "order = np.random.default_rng(seed).permutation(n).astype(np.int64)")]
