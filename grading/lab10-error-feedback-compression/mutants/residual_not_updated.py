# mutant: adds the residual but hands the old one back unchanged
# loses: allreduce, residual, correct_process, training
REPLACE = [("    return total / comm.size, p - mine\n", "    return total / comm.size, residual\n")]
