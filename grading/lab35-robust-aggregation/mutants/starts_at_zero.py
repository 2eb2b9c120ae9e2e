# mutant: the iteration starts from z = 0 instead of the weighted mean
# loses: geometric_median, weighted
# says: starts from the weighted mean
REPLACE = [("    z = (c[:, None] * G).sum(axis=0) / c.sum()\n", "    z = np.zeros(G.shape[1])\n")]
