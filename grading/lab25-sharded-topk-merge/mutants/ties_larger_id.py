# mutant: equal distances are broken by the larger id, in the local lists and in the merge
# loses: ids, small_shards, correct_process
# says: smaller id
REPLACE = [("        pick = np.lexsort((rows, dist))[:width]", "        pick = np.lexsort((-rows, dist))[:width]"),
           ("        order = np.lexsort((i, d))[:k]", "        order = np.lexsort((-i, d))[:k]")]
