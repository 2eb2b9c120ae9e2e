# mutant: clients ship their rows (X_k, y_k) to the server, which runs their rounds for them: right values, data on
# the wire
# loses: privacy
# says: not data
import numpy as np


def scaffold(comm, w, X, y, rounds, lr, steps, lr_g):
    K, r = comm.size, comm.rank
    w = np.array(w, dtype=np.float64)
    d = len(w)
    if r:
        c_i = np.zeros(d)
        for t in range(int(rounds)):
            down = comm.recv(0)
            comm.send(np.concatenate([X.astype(np.float64).ravel(), y.astype(np.float64)]), 0)
            c_i = c_i + client_round(down[:d], down[d:], c_i, X, y, lr, steps)[1]  # noqa: F821
        return c_i
    c, cs, alive = np.zeros(d), {q: np.zeros(d) for q in range(1, K)}, list(range(1, K))
    history = np.zeros((int(rounds), 2, d))
    for t in range(int(rounds)):
        for q in alive:
            comm.send(np.concatenate([w, c]), q)
        dys, dcs = [], []
        for q in list(alive):
            try:
                rows = np.asarray(comm.recv(q))
            except cluster.PeerCrashedError:  # noqa: F821
                alive.remove(q)
                continue
            n = len(rows) // (d + 1)
            dy, dc = client_round(w, c, cs[q], rows[:n * d].reshape(n, d), rows[n * d:], lr, steps)  # noqa: F821
            cs[q] = cs[q] + dc
            dys.append(dy)
            dcs.append(dc)
        if dys:
            w, c = w + lr_g * np.mean(dys, axis=0), c + np.sum(dcs, axis=0) / (K - 1)
        history[t] = w, c
    return history
