# mutant: ranks entries by signed value, not by |value|
# loses: topk, allreduce, residual, correct_process, training
REPLACE = [("np.argsort(-np.abs(vec), kind=\"stable\")", "np.argsort(-vec, kind=\"stable\")")]
