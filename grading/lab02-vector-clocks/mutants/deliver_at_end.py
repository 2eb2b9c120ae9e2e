# mutant: holds every received message until the script ends, then delivers them in causal order: right order, late
# loses: delivery, causal, process
import numpy as np


def causal_broadcast(comm, script):
    me, size = comm.rank, comm.size
    delivered = np.zeros(size, dtype=np.int64)
    held, log = [], []
    for kind, peer in np.asarray(script, dtype=np.int64).reshape(-1, 2):
        if kind == 0:
            delivered[me] += 1
            for other in range(size):
                if other != me:
                    comm.send(delivered.copy(), other)
            log.append((me, int(delivered[me])))
        else:
            held.append((int(peer), np.asarray(comm.recv(int(peer)), dtype=np.int64)))
    while held:
        i = next(i for i, (j, w) in enumerate(held) if deliverable(w, delivered, j))  # noqa: F821
        j, w = held.pop(i)
        delivered[j] += 1
        log.append((j, int(w[j])))
    return np.array(log, dtype=np.int64).reshape(len(log), 2)
