# mutant: no padding: the ranks whose next position is past n read one sample fewer
# loses: same_k, k_changes, schedules
# says: equal counts
REPLACE = [("    return perm[tape % n].astype(np.int64)", "    return perm[tape[tape < n]].astype(np.int64)")]
