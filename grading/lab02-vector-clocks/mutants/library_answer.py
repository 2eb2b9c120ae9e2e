# mutant: takes the chapter's VectorClock from the course library through an import path a grep does not see
# loses: delivery, causal, process, timestamps
import importlib

import numpy as np


def causal_broadcast(comm, script):
    lib = importlib.import_module("scaleoutai.foundations." + "clo" + "cks")
    clock = lib.VectorClock(comm.rank, comm.size)
    log, got = [], np.zeros(comm.size, dtype=np.int64)
    for kind, peer in np.asarray(script).reshape(-1, 2):
        if kind == 0:
            v = clock.send()
            for other in range(comm.size):
                if other != comm.rank:
                    comm.send(v, other)
            log.append((comm.rank, int(v[comm.rank])))
        else:
            clock.receive(comm.recv(int(peer)))
            got[peer] += 1
            log.append((int(peer), int(got[peer])))
    return np.array(log, dtype=np.int64).reshape(len(log), 2)
