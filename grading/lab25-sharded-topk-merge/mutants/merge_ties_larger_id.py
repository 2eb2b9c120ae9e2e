# mutant: only the merge breaks ties the other way (the larger id first); each shard's own list is right
# loses: ids, small_shards, correct_process
# says: smaller id
REPLACE = [("        order = np.lexsort((I[r], D[r]))[:k]", "        order = np.lexsort((-I[r], D[r]))[:k]")]
