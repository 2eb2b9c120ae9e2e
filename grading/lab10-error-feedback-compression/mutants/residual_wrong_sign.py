# mutant: keeps C(p) - p instead of p - C(p)
# loses: allreduce, residual, correct_process, training
REPLACE = [("    return total / comm.size, p - mine\n", "    return total / comm.size, mine - p\n")]
