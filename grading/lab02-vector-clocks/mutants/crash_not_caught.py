# mutant: the leader does not catch PeerCrashedError, so one crashed follower ends the run
# loses: minority, majority_lost
import numpy as np


def replicate(comm, entries):
    if comm.rank == 0:
        committed = np.zeros(len(entries), dtype=bool)
        for i, value in enumerate(entries):
            for f in range(1, comm.size):
                comm.send(np.array([value]), f)
            acks = sum(1 for f in range(1, comm.size) if comm.recv(f) is not None)
            committed[i] = 2 * (1 + acks) > comm.size
        return committed
    log = []
    for _ in range(len(entries)):
        log.append(comm.recv(0)[0])
        comm.send(np.array([1], dtype=np.int8), 0)
    return np.array(log, dtype=np.float64)
