# mutant: computes the progress in the dtype the rows came in: int32 rows make epoch * n wrap past 2**31 (late
# epochs of a big dataset)
# loses: agree
REPLACE = [("rows = np.asarray(saved, dtype=np.int64).reshape(-1, 4)", "rows = np.asarray(saved).reshape(-1, 4)")]
