# mutant: clients ship their rows (n_k, X_k, y_k) to the server, which trains for them: right models, data on the wire
# loses: privacy
# says: send the model, not data
import numpy as np


def fedavg(comm, w, X, y, rounds, lr, steps):
    K, r = comm.size, comm.rank
    w = np.array(w, dtype=np.float64)
    history = np.zeros((int(rounds), len(w)))
    d = len(w)
    if r:
        for t in range(int(rounds)):
            w_t = comm.recv(0)
            comm.send(np.concatenate([[float(len(y))], X.ravel(), y]), 0)
            history[t] = local_train(w_t, X, y, lr, steps)  # noqa: F821
        return history
    alive = list(range(1, K))
    for t in range(int(rounds)):
        for q in alive:
            comm.send(w, q)
        counts, models = [], []
        for q in list(alive):
            try:
                msg = comm.recv(q)
            except cluster.PeerCrashedError:  # noqa: F821
                alive.remove(q)
                continue
            n = int(msg[0])
            Xq, yq = msg[1:1 + n * d].reshape(n, d), msg[1 + n * d:]
            counts.append(float(n))
            models.append(local_train(w, Xq, yq, lr, steps))  # noqa: F821
        if sum(counts) > 0:
            w = sum(c * m for c, m in zip(counts, models)) / sum(counts)
        history[t] = w
    return history
