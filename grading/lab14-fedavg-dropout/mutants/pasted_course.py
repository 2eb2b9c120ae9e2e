# mutant: the course's FedAvg with dropout (scaleoutai.ml.federated: train_fedavg's rounds and weighted_average),
# adapted by hand to the lab's signature: local gradient steps, n_k-weighted average of the reported models,
# no control variates (c and c_i stay 0)
# loses: no_drop, dropout, edge, drift, privacy, clients, broadcast, correct_process
# says: the lab asks for SCAFFOLD's control variates that correct client drift
# score-at-most: 50
import numpy as np


def scaffold(comm, w, X, y, rounds, lr, steps, lr_g):
    K, r = comm.size, comm.rank
    w = np.array(w, dtype=np.float64)
    d = len(w)
    history = np.zeros((int(rounds), 2, d))
    if r != 0:
        for t in range(int(rounds)):
            w_k = np.asarray(comm.recv(0), dtype=np.float64)[:d]
            for _ in range(int(steps)):
                w_k = w_k - lr * grad(w_k, X, y)  # noqa: F821
            comm.send(np.concatenate([[float(len(y))], w_k]), 0)
        return np.zeros(d)
    alive = list(range(1, K))
    for t in range(int(rounds)):
        for q in alive:
            comm.send(w, q)
        counts, models = [], []
        for q in list(alive):
            try:
                report = comm.recv(q)
            except cluster.PeerCrashedError:  # noqa: F821
                alive.remove(q)
                continue
            counts.append(report[0])
            models.append(report[1:])
        total = float(np.sum(counts)) if counts else 0.0
        if total > 0:
            acc = np.zeros(d)
            for n_k, w_k in zip(counts, models):
                acc += n_k * w_k
            w = acc / total
        history[t, 0] = w
    return history
