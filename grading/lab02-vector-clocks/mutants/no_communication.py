# mutant: each rank ticks its own entry and never sends or receives: the clocks are Lamport-free local counters
# loses: clocks
import numpy as np


def vector_clock_run(comm, events):
    V = np.zeros(comm.size, dtype=np.int64)
    out = []
    for _ in events:
        V[comm.rank] += 1
        out.append(V.copy())
    return np.array(out, dtype=np.int64).reshape(len(events), comm.size)
