# mutant: the majority counts only the acks and forgets that the leader holds the entry too
# loses: minority, majority_lost
import numpy as np
from scaleoutai import cluster


def replicate(comm, entries):
    if comm.rank == 0:
        alive = set(range(1, comm.size))
        committed = np.zeros(len(entries), dtype=bool)
        for i, value in enumerate(entries):
            for f in sorted(alive):
                comm.send(np.array([value]), f)
            acks = 0
            for f in sorted(alive):
                try:
                    comm.recv(f)
                    acks += 1
                except cluster.PeerCrashedError:
                    alive.discard(f)
            committed[i] = 2 * acks > comm.size
        return committed
    log = []
    for _ in range(len(entries)):
        log.append(comm.recv(0)[0])
        comm.send(np.array([1], dtype=np.int8), 0)
    return np.array(log, dtype=np.float64)
