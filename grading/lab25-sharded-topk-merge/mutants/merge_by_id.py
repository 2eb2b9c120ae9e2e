# mutant: the merge orders the candidates by id instead of by distance
# loses: distances, small_shards, correct_process
REPLACE = [("        order = np.lexsort((I[r], D[r]))[:k]", "        order = np.argsort(I[r], kind=\"stable\")[:k]")]
