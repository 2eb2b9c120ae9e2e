# mutant: resume_indices returns int32 indices where the lab says int64 (replay still stacks them as int64)
# loses: same_k, k_changes
# says: return int64
REPLACE = [("return perm[tape % n].astype(np.int64)", "return perm[tape % n].astype(np.int32)")]
