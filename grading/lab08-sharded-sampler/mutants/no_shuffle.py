# mutant: never shuffles: the order is 0, 1, 2, ... in every epoch
# loses: spec, resume, reshuffled
# says: not shuffled
REPLACE = [("order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)",
            "order = np.arange(n, dtype=np.int64)")]
