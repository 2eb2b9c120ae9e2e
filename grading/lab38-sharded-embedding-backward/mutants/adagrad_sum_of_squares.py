# mutant: row-wise Adagrad adds the SUM of g^2 over the columns, not the mean (d times too large)
# loses: update_rowwise, small, correct_process
REPLACE = [("(g * g).mean(axis=1)", "(g * g).sum(axis=1)")]
