# mutant: a client forgets its control variate between rounds (c_i starts at 0 every round)
# loses: no_drop, dropout, edge, drift, correct_process
REPLACE = [("            c_i = c_i + delta_c\n", "            c_i = np.zeros(d)\n")]
