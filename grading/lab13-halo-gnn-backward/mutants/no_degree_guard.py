# mutant: divides by the in-degree without guarding 0: a vertex without in-edges gets NaN
# loses: small, random
REPLACE = [("inv = (1 / np.maximum(deg, 1)).astype(X_own.dtype)", "inv = (1 / deg).astype(X_own.dtype)")]
