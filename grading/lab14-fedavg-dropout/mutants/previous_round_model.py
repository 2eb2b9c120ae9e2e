# mutant: from round 2 on the server sends the model of the round before (w_{t-1}), so clients train from stale weights
# loses: no_drop, dropout, correct_process
import numpy as np


def fedavg(comm, w, X, y, rounds, lr, steps):
    K, r = comm.size, comm.rank
    w = np.array(w, dtype=np.float64)
    history = np.zeros((int(rounds), len(w)))
    if r:
        for t in range(int(rounds)):
            w_k = local_train(comm.recv(0), X, y, lr, steps)  # noqa: F821
            comm.send(np.concatenate([[float(len(y))], w_k]), 0)
            history[t] = w_k
        return history
    alive, previous = list(range(1, K)), w.copy()
    for t in range(int(rounds)):
        for q in alive:
            comm.send(previous, q)
        previous = w.copy()
        counts, models = [], []
        for q in list(alive):
            try:
                rep = comm.recv(q)
            except cluster.PeerCrashedError:  # noqa: F821
                alive.remove(q)
                continue
            counts.append(rep[0])
            models.append(rep[1:])
        if sum(counts) > 0:
            w = sum(n * m for n, m in zip(counts, models)) / sum(counts)
        history[t] = w
    return history
