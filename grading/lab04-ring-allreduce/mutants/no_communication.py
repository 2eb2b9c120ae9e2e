# mutant: each rank returns its own input: it never communicates
# loses: correct_sim, correct_process, bandwidth, send_recv_only
def ring_allreduce(comm, x):
    return x.copy() if comm.size == 1 else x * 0 + x
