# %% [markdown]
# # Lab 14: SCAFFOLD with client dropout
#
# Section 4 of the chapter showed FedAvg drifting on label-skewed clients: with several local steps,
# each client walks towards *its own* optimum, and the average of those walks stops short of the
# optimum of the whole federation however many rounds you run. The research notes name the cure that
# this lab builds: **control variates** (SCAFFOLD, Karimireddy et al., "SCAFFOLD: Stochastic Controlled
# Averaging for Federated Learning", ICML 2020). Each client i keeps c_i, an estimate of its own
# gradient; the server keeps c, an estimate of the average gradient; a local step follows
# g_i(y) - c_i + c, the client's gradient corrected towards the federation's, so the local walk no
# longer drifts. The course has FedAvg; it does not have SCAFFOLD, and the grader makes
# `scaleoutai.ml` (and every course module that reaches it) unimportable.
#
# A server (rank 0) and N = K - 1 clients (ranks 1..K-1) fit a linear model on least-squares clients:
# client i holds (X_i, y_i), n_i rows of d features, and f_i(w) = (1/n_i) ||X_i w - y_i||^2, whose
# gradient `grad(w, X, y)` is given below (zero for a client with no rows). Server and clients start
# with c = c_i = 0. In round t:
#
# 1. the server sends **one message** (w, c), 2d float64 numbers, to every client it still hears from;
# 2. client i sets y = w and takes `steps` local steps  y <- y - lr (g_i(y) - c_i + c);
#    then updates its control variate with the paper's **option II**
#
#        c_i+ = c_i - c + (w - y) / (steps * lr),
#
#    and reports **one message** (delta_y, delta_c) = (y - w, c_i+ - c_i), 2d float64 numbers;
#    it keeps c_i+ for the next round;
# 3. with S the clients that reported this round, the server sets
#
#        w <- w + lr_g * (1/|S|) sum_{i in S} delta_y_i        (uniform weights, not n_i)
#        c <- c + (1/N) sum_{i in S} delta_c_i                 (N = all clients, reporting or not)
#
#    and keeps w and c when S is empty (K = 1, or everyone has dropped).
#
# Dividing c's update by N, not |S|, is what the paper does: c stays the average of *all* the c_i,
# including the frozen c_j of a client that is not reporting.
#
# **Dropout.** The grader decides who drops: a crash fault stops a client's process when it tries to
# send. The server learns it from `comm.recv`, which raises `cluster.PeerCrashedError`; catch it, leave
# that client out of this round and of every later one (drops are permanent: send it nothing again)
# and carry on. Its c_j stays counted in c through the 1/N above.
#
# **Return values.** The server returns an array of shape (rounds, 2, d), float64: [t, 0] is w and
# [t, 1] is c after round t. A client returns its control variate c_i after the last round (d,).
# The grader checks both after every round against its own reference, runs its own FedAvg beside your
# SCAFFOLD on heterogeneous clients (yours must reach the optimum where FedAvg drifts), counts every
# byte itself (at most 2d + 1 float64 per report) and looks inside the messages: rows of X or y never
# leave a client.

# %% tags=["parameters"]
K = 5  # smoke: 3
ROUNDS = 60  # smoke: 30
D = 4

# %%
import numpy as np

from scaleoutai import cluster


def grad(w, X, y):
    """Given: the gradient of f_i(w) = (1/n) ||X w - y||^2 in float64; zero when the client has no rows."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return (2.0 / len(y)) * (X.T @ (X @ w - y)) if len(y) else np.zeros(len(w))


# %% [markdown]
# ## Exercise 1: one client's round
#
# `client_round(w, c, c_i, X, y, lr, steps)` runs the corrected local steps from w and returns the
# report (delta_y, delta_c), two (d,) float64 arrays. With c = c_i = 0 it is FedAvg's local training.

# %%
def client_round(w, c, c_i, X, y, lr, steps):
    """SCAFFOLD's local work: ``steps`` corrected steps from w, then option II. Returns (y - w, c_i+ - c_i)."""
    ### BEGIN SOLUTION
    w = np.asarray(w, dtype=np.float64)
    c, c_i = np.asarray(c, dtype=np.float64), np.asarray(c_i, dtype=np.float64)
    steps = int(steps)
    if steps < 1 or not lr > 0:
        raise ValueError(f"need steps >= 1 and lr > 0, got steps={steps}, lr={lr}")
    correction = c - c_i               # the same for every local step of this round
    local = w.copy()
    for _step in range(steps):
        local = local - lr * (grad(local, X, y) + correction)
    c_new = c_i - c + (w - local) / (steps * lr)   # option II: the average corrected gradient, uncorrected
    return local - w, c_new - c_i
    ### END SOLUTION


# %% [markdown]
# ## Exercise 2: server and clients over the communicator
#
# Rank 0 is the server (its X, y are empty); ranks >= 1 are clients. Follow the protocol above: one
# message (w, c) down and one message (delta_y, delta_c) up per client and round, nothing else.

# %%
def scaffold(comm, w, X, y, rounds, lr, steps, lr_g):
    """SCAFFOLD with dropout. The server returns (rounds, 2, d) float64 of (w, c) after each round; a client
    returns its control variate c_i (d,) float64."""
    ### BEGIN SOLUTION
    K, rank, rounds = comm.size, comm.rank, int(rounds)
    w = np.array(w, dtype=np.float64).reshape(-1)
    d = len(w)
    if rank != 0:
        c_i = np.zeros(d)
        for _round in range(rounds):
            down = np.asarray(comm.recv(0), dtype=np.float64)
            if down.shape != (2 * d,):
                raise ValueError(f"client {rank} expected (w, c) of {2 * d} numbers, got shape {down.shape}")
            delta_y, delta_c = client_round(down[:d], down[d:], c_i, X, y, lr, steps)
            comm.send(np.concatenate([delta_y, delta_c]), 0)
            c_i = c_i + delta_c
        return c_i
    n_clients = K - 1
    c = np.zeros(d)
    alive = list(range(1, K))
    history = np.zeros((rounds, 2, d))
    for rnd in range(rounds):
        message = np.concatenate([w, c])
        for q in alive:
            comm.send(message, q)
        sum_dy, sum_dc, reported = np.zeros(d), np.zeros(d), 0
        for q in list(alive):
            try:
                report = np.asarray(comm.recv(q), dtype=np.float64)
            except cluster.PeerCrashedError:
                alive.remove(q)        # gone for good: never sent to again, its c_q stays inside c
                continue
            sum_dy += report[:d]
            sum_dc += report[d:]
            reported += 1
        if reported:
            w = w + lr_g * sum_dy / reported
            c = c + sum_dc / n_clients
        history[rnd, 0], history[rnd, 1] = w, c
    return history
    ### END SOLUTION


# %% [markdown]
# Try it on the simulator with heterogeneous clients: each one's labels come from its own true
# weights, so their optima disagree. FedAvg (the same local steps with c = c_i = 0, computed here
# without a network) stops away from the optimum of (1/N) sum f_i; SCAFFOLD reaches it.
# `cluster.Faults(crash={r: c})` makes client r drop when it tries to send its (c+1)-th message: it
# reports in rounds 0..c-1 and is gone from round c on.

# %% tags=["demo"]
rng = np.random.default_rng(1)
data = [(np.zeros((0, D)), np.zeros(0))]
for k in range(1, K):
    Xk = rng.standard_normal((int(rng.integers(8, 30)), D))
    data.append((Xk, Xk @ (3 * rng.standard_normal(D)) + 0.1 * rng.standard_normal(len(Xk))))
w0, LR, STEPS = np.zeros(D), 0.05, 8
H = sum(2 * Xk.T @ Xk / len(yk) for Xk, yk in data[1:])
w_star = np.linalg.solve(H, sum(2 * Xk.T @ yk / len(yk) for Xk, yk in data[1:]))


def worker(comm):
    return scaffold(comm, w0, *data[comm.rank], ROUNDS, LR, STEPS, 1.0)


try:
    w_fedavg, zero = w0.copy(), np.zeros(D)
    for _ in range(ROUNDS):
        w_fedavg = w_fedavg + np.mean([client_round(w_fedavg, zero, zero, *data[k], LR, STEPS)[0]
                                       for k in range(1, K)], axis=0)
    res = cluster.run(worker, K, timeout=120)
    gap_s = np.linalg.norm(res.values[0][-1, 0] - w_star) / np.linalg.norm(w_star)
    gap_f = np.linalg.norm(w_fedavg - w_star) / np.linalg.norm(w_star)
    print(f"distance to the optimum after {ROUNDS} rounds: SCAFFOLD {gap_s:.2e}, FedAvg {gap_f:.2e}")
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats])
    assert gap_s < 1e-4 < gap_f
    dropped = cluster.run(worker, K, faults=cluster.Faults(crash={1: 2}), timeout=120)
    print("with client 1 gone after 2 rounds, final (w, c):\n", np.round(dropped.values[0][-1], 4))
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
