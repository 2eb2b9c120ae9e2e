# mutant: draws the order into int16 and widens it afterwards: int64 on the way out, but indices above 32767 wrap
# loses: exactly_once, spec, resume
# says: too narrow
REPLACE = [("order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)",
            "order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int16).astype(np.int64)")]
