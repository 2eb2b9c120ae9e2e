# mutant: the merge sorts by distance only (a stable sort of the pieces in rank order, round 1 before round 2):
# the smaller id wins a tie only while that order is id order
# loses: ids, small_shards
# says: smaller id
REPLACE = [("        order = np.lexsort((i, d))[:k]", "        order = np.argsort(d, kind=\"stable\")[:k]")]
