# mutant: row-wise Adagrad divides by the accumulator of the previous step (the row is updated before a grows)
# loses: update_rowwise, small, correct_process
REPLACE = [("""    acc[local] += (g * g).mean(axis=1) if g.shape[1] else 0
    rows[local] -= lr * g / (np.sqrt(acc[local])[:, None] + EPS)""",
            """    rows[local] -= lr * g / (np.sqrt(acc[local])[:, None] + EPS)
    acc[local] += (g * g).mean(axis=1) if g.shape[1] else 0""")]
