# mutant: the correction with the wrong sign: local steps follow g_i(y) + c_i - c
# loses: no_drop, dropout, edge, drift, correct_process
REPLACE = [("    correction = c - c_i ", "    correction = c_i - c ")]
