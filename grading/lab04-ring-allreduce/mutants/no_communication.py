# mutant: each rank returns its own input: it never communicates
# loses: correct_sim, correct_process, bandwidth, latency, schedule
def halving_doubling_allreduce(comm, x):
    return x.copy() if comm.size == 1 else x * 0 + x
