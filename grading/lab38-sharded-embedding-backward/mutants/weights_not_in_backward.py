# mutant: the per-sample weights scale the pooled rows but not the gradients going back
# loses: update_sgd, update_rowwise, small, correct_process, gradients
REPLACE = [("contrib = contrib * np.asarray(weights, dtype=grad.dtype).reshape(-1, 1)", "contrib = contrib")]
