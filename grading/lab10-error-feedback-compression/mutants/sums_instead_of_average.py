# mutant: returns the sum over ranks, not the mean
# loses: allreduce, correct_process, training
REPLACE = [("    return total / comm.size, p - mine\n", "    return total, p - mine\n")]
