# mutant: rank r owns variables n*r//K .. n*(r+1)//K - 1, not block_bounds(n, K)[r]: other blocks when K does not divide n
# loses: solved_lossless, solved_lossy
REPLACE = [("    bounds = block_bounds(n, comm.size)\n",
            "    bounds = [(n * q // comm.size, n * (q + 1) // comm.size) for q in range(comm.size)]\n")]
