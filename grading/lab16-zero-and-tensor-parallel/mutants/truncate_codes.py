# mutant: codes by a cast, (x / s).astype(np.int8), which truncates toward zero: errors up to a whole step s_j
# loses: weights_sim, weights_process
# says: rounded to the nearest integer
REPLACE = [("q = np.rint(part / scales[j])", "q = np.trunc(part / scales[j])")]
