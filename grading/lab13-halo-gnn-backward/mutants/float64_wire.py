# mutant: the halo rows travel as float64 whatever the data's dtype (a float32 layer sends twice the bytes)
# loses: halo_traffic
# says: data's dtype
REPLACE = [("rows = exchange(comm, [X_own[local[w]] for w in wanted], skip=quiet)",
            "rows = exchange(comm, [X_own[local[w]].astype(np.float64) for w in wanted], skip=quiet)")]
