# mutant: averages over the K - 1 other ranks' count: divides the sum by K - 1
# loses: allreduce, correct_process
REPLACE = [("    avg = (total / p.dtype.type(comm.size))", "    avg = (total / p.dtype.type(max(comm.size - 1, 1)))")]
