# mutant: weights by the n_k of every client ever heard from, including those that dropped since
# loses: dropout
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
    alive, seen = list(range(1, K)), {}
    for t in range(int(rounds)):
        for q in alive:
            comm.send(w, q)
        acc = np.zeros_like(w)
        reported = 0.0
        for q in list(alive):
            try:
                rep = comm.recv(q)
            except cluster.PeerCrashedError:  # noqa: F821
                alive.remove(q)
                continue
            seen[q] = rep[0]
            acc += rep[0] * rep[1:]
            reported += rep[0]
        if reported > 0:
            w = acc / sum(seen.values())
        history[t] = w
    return history
