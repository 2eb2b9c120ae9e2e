# mutant: the per-id gradient is scattered with fancy-index += instead of np.add.at: a duplicated id keeps one
# entry's contribution, not their sum
# loses: update_sgd, update_rowwise, small, correct_process, gradients
REPLACE = [("np.add.at(out, inv, contrib)", "out[inv] += contrib")]
