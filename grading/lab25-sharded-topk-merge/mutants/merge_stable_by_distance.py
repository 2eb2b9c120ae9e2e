# mutant: the merge sorts by distance only (a stable sort of the parts in rank order): the smaller id wins a tie only while rank order is id order
# loses: ids
# says: smaller id
REPLACE = [("        order = np.lexsort((I[r], D[r]))[:k]", "        order = np.argsort(D[r], kind=\"stable\")[:k]")]
