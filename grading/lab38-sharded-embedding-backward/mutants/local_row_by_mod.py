# mutant: the owner finds a requested id's local row as id // K, which holds only for the mod placement
# loses: pooled, small
REPLACE = [("loc = {j: np.searchsorted(mine, asked[j]) for j in asked}",
            "loc = {j: np.minimum(asked[j] // K, max(len(mine) - 1, 0)) for j in asked}")]
