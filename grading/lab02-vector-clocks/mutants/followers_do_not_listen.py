# mutant: followers ack without keeping what the leader sent (they return their own NaN entries)
# loses: commit, minority, majority_lost
import numpy as np
from scaleoutai import cluster

_right = replicate  # noqa: F821


def replicate(comm, entries):
    if comm.rank == 0:
        return _right(comm, entries)
    for _ in range(len(entries)):
        comm.recv(0)
        comm.send(np.array([1], dtype=np.int8), 0)
    return np.asarray(entries, dtype=np.float64)
