# mutant: the chapter's vector clocks (clocks.VectorClock and clock_worker) adapted by hand: tick on every event,
# merge on every receive, send the clock with each broadcast, and deliver each message the moment it arrives
# loses: rule, causal, timestamps
# says: the lab asks for causal delivery
# score-at-most: 50
import numpy as np


def deliverable(stamp, delivered, sender):
    return True  # the chapter has no delivery rule: a message is used when it is received


def causal_broadcast(comm, script):
    v = np.zeros(comm.size, dtype=np.int64)  # VectorClock.v
    heard = np.zeros(comm.size, dtype=np.int64)  # messages received per sender (FIFO links: their seq)
    log = []
    for kind, peer in np.asarray(script, dtype=np.int64).reshape(-1, 2):
        if kind == 0:  # clock_worker's "send": tick, then the vector travels with the message
            v[comm.rank] += 1
            for dst in range(comm.size):
                if dst != comm.rank:
                    comm.send(v.copy(), dst)
            heard[comm.rank] += 1
            log.append((comm.rank, int(heard[comm.rank])))
        else:  # clock_worker's "recv": merge (elementwise max), then tick
            msg = comm.recv(int(peer))
            np.maximum(v, np.asarray(msg, dtype=np.int64), out=v)
            v[comm.rank] += 1
            heard[peer] += 1
            log.append((int(peer), int(heard[peer])))
    return np.array(log, dtype=np.int64).reshape(len(log), 2)
