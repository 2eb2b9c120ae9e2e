# mutant: shard_indices returns int32 indices where the lab's rule says int64 (rank_epochs still stacks int64)
# loses: spec, resume
# says: return int64
REPLACE = [("return order[rank::K][start:].copy()", "return order[rank::K][start:].astype(np.int32)")]
