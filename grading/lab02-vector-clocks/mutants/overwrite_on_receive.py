# mutant: on receive the clock is replaced by the message's clock instead of the element-wise max
# loses: clocks
# says: element-wise max
import numpy as np


def vector_clock_run(comm, events):
    V = np.zeros(comm.size, dtype=np.int64)
    out = []
    for kind, peer in events:
        if kind == 2:
            V = comm.recv(int(peer)).copy()
        V[comm.rank] += 1
        if kind == 1:
            comm.send(V.copy(), int(peer))
        out.append(V.copy())
    return np.array(out, dtype=np.int64).reshape(len(events), comm.size)
