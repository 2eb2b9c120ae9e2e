# %% [markdown]
# # Lab 14: FedAvg with client dropout
#
# A server (rank 0) and K - 1 clients (ranks 1..K-1) train a linear model together for `rounds`
# rounds. Client k holds its own examples (X_k, y_k), n_k rows of d features, and they never leave it.
# In every round:
#
# 1. the server sends the global model w_t (d float64 numbers) to every client it still hears from;
# 2. each client runs `local_train(w_t, X_k, y_k, lr, steps)` (given below) and reports **one message**
#    to the server: `np.concatenate([[n_k], w_k])`, d + 1 float64 numbers;
# 3. the server sets
#
#        w_{t+1} = sum_k n_k w_k / sum_k n_k      over the clients that reported in round t,
#
#    and keeps w_{t+1} = w_t when nobody reported (or every reporter had n_k = 0).
#
# **Dropout.** A client that drops never sends again: its process stops when it tries to send. The
# server learns it from `comm.recv`, which raises `cluster.PeerCrashedError` for a peer that has
# crashed; catch it, leave that client out of this round and of every later one (do not send to it
# again), and carry on. The weights are the n_k of the clients that reported *this* round, never those
# of a client that has gone.
#
# **Return values.** The server returns the global model after every round, an array of shape
# (rounds, d), float64. A client returns its own models w_k of every round it completed, shape
# (rounds, d). The grader decides who drops and when, counts every byte itself, and looks inside the
# messages: only models and counts may reach the server, never rows of X or y.

# %% tags=["parameters"]
K = 5  # smoke: 3
ROUNDS = 4  # smoke: 2
D = 6

# %%
import numpy as np

from scaleoutai import cluster


def local_train(w, X, y, lr, steps):
    """Given: ``steps`` full-batch gradient steps on (1/n) ||X w - y||^2 from w; w itself when n = 0."""
    w = np.asarray(w, dtype=np.float64).copy()
    if len(y) == 0:
        return w
    for _ in range(int(steps)):
        w = w - lr * (2.0 / len(y)) * (X.T @ (X @ w - y))
    return w


# %%
def fedavg(comm, w, X, y, rounds, lr, steps):
    """FedAvg with dropout. Rank 0: the server (w is the initial model; X, y are empty). Ranks >= 1: clients.

    Returns the (rounds, d) float64 array of global models (server) or of local models (client).
    """
    ### BEGIN SOLUTION
    K, r = comm.size, comm.rank
    w = np.array(w, dtype=np.float64)
    history = np.zeros((int(rounds), len(w)))
    if r != 0:
        for t in range(int(rounds)):
            w = comm.recv(0)
            w_k = local_train(w, X, y, lr, steps)
            comm.send(np.concatenate([[float(len(y))], w_k]), 0)
            history[t] = w_k
        return history
    alive = list(range(1, K))
    for t in range(int(rounds)):
        for q in alive:
            comm.send(w, q)
        counts, models = [], []
        for q in list(alive):
            try:
                report = comm.recv(q)
            except cluster.PeerCrashedError:
                alive.remove(q)
                continue
            counts.append(report[0])
            models.append(report[1:])
        total = float(np.sum(counts)) if counts else 0.0
        if total > 0:
            w = sum(n * m for n, m in zip(counts, models)) / total
        history[t] = w
    return history
    ### END SOLUTION


# %% [markdown]
# Try it on the simulator. `cluster.Faults(crash={r: c})` makes client r drop when it tries to send its
# (c+1)-th message: with one report per round, it reports in rounds 0..c-1 and is gone from round c on.

# %%
rng = np.random.default_rng(1)
sizes = [0] + [int(s) for s in rng.integers(3, 30, size=K - 1)]
data = [(rng.standard_normal((n, D)), rng.standard_normal(n)) for n in sizes]
w0 = np.zeros(D)


def worker(comm):
    X, y = data[comm.rank]
    return fedavg(comm, w0, X, y, ROUNDS, 0.05, 3)


try:
    res = cluster.run(worker, K, faults=cluster.Faults(crash={1: 1}) if K > 2 else None, timeout=60)
    print("global model after each round:\n", np.round(res.values[0], 4))
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats])
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(fedavg, local_train)
