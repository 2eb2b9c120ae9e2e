# mutant: the merge orders the candidates by id instead of by distance
# loses: distances, ids, small_shards, correct_process, traffic
REPLACE = [("        order = np.lexsort((I[r], D[r]))[:k]", "        order = np.argsort(I[r], kind=\"stable\")[:k]")]
