# mutant: aggregates with the course library's weighted average through an import path a grep misses
# loses: no_drop, dropout, all_drop, privacy, clients, broadcast, correct_process
import importlib

import numpy as np


def fedavg(comm, w, X, y, rounds, lr, steps):
    lib = importlib.import_module("scaleoutai.ml." + "fede" + "rated")
    K, r = comm.size, comm.rank
    w = np.array(w, dtype=np.float64)
    history = np.zeros((int(rounds), len(w)))
    if r:
        for t in range(int(rounds)):
            w_k = local_train(comm.recv(0), X, y, lr, steps)  # noqa: F821
            comm.send(np.concatenate([[float(len(y))], w_k]), 0)
            history[t] = w_k
        return history
    alive = list(range(1, K))
    for t in range(int(rounds)):
        for q in alive:
            comm.send(w, q)
        got = []
        for q in list(alive):
            try:
                got.append(comm.recv(q))
            except cluster.PeerCrashedError:  # noqa: F821
                alive.remove(q)
        new = lib.weighted_average([g[1:] for g in got], [g[0] for g in got]) if got else None
        w = w if new is None else new
        history[t] = w
    return history
