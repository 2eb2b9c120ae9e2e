# mutant: a send carries the clock from before this event's increment
# loses: clocks
import numpy as np


def vector_clock_run(comm, events):
    V = np.zeros(comm.size, dtype=np.int64)
    out = []
    for kind, peer in events:
        if kind == 2:
            V = np.maximum(V, comm.recv(int(peer)))
        if kind == 1:
            comm.send(V.copy(), int(peer))
        V[comm.rank] += 1
        out.append(V.copy())
    return np.array(out, dtype=np.int64).reshape(len(events), comm.size)
