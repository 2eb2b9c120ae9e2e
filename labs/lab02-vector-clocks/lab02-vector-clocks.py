# %% [markdown]
# # Lab 2: vector clocks and majority commit
#
# Chapter 2 treats a cluster as processes that only exchange messages and may crash. Two tools follow
# from that view, and you write both on the simulated cluster:
#
# **Vector clocks.** Each of the K ranks keeps a vector V of K counters. Before each of its events,
# rank i increments V[i]; a message carries the sender's V (after that increment); a receiver first
# takes the element-wise maximum of its V and the message's V, then increments its own entry.
# Then event a happened-before event b exactly when V(a) <= V(b) element-wise and V(a) != V(b).
#
# `vector_clock_run(comm, events)` gets this rank's events, one row `(kind, peer)` each:
# kind 0 is a local event, kind 1 sends to `peer`, kind 2 receives from `peer`. Return an integer
# array of shape (len(events), K): the rank's clock after each event (shape (0, K) for a rank without
# events; a long run counts hundreds of events, so keep the counters in int64).
#
# **Majority commit.** Rank 0 is the leader. For each entry, the leader sends it to every follower;
# a follower appends it to its log and answers with an acknowledgement. The entry is committed once a
# majority of the K ranks holds it, the leader included: 1 + acks > K/2. Followers may crash (fail-stop);
# in the simulator, `comm.recv` from a crashed rank raises `cluster.PeerCrashedError`, which the leader
# must catch and count as "no ack". With f crashed followers the log still commits when f < K/2, and
# must not commit when f >= K/2: that is why a cluster of 2f+1 machines survives f crashes.
#
# `replicate(comm, entries)`: on rank 0 `entries` holds the values; on followers it is an array of the
# same length filled with NaN (they must learn the values from the leader). The leader returns a
# boolean array `committed`; each follower returns its log as an array of the values it received.

# %% tags=["parameters"]
K = 5  # smoke: 3
ENTRIES = 6  # smoke: 3

# %%
import numpy as np

from scaleoutai import cluster


# %%
def vector_clock_run(comm, events):
    """Clock of this rank after each event; events are rows (kind, peer): 0 local, 1 send, 2 recv."""
    ### BEGIN SOLUTION
    V = np.zeros(comm.size, dtype=np.int64)
    out = []
    for kind, peer in events:
        if kind == 2:
            V = np.maximum(V, comm.recv(int(peer)))
        V[comm.rank] += 1
        if kind == 1:
            comm.send(V.copy(), int(peer))
        out.append(V.copy())
    return np.array(out, dtype=np.int64).reshape(len(events), comm.size)
    ### END SOLUTION


# %%
def replicate(comm, entries):
    """Leader (rank 0): send each entry, count acks, commit on a majority. Followers: log and ack."""
    ### BEGIN SOLUTION
    if comm.rank == 0:
        alive = set(range(1, comm.size))
        committed = np.zeros(len(entries), dtype=bool)
        for i, value in enumerate(entries):
            for f in sorted(alive):
                comm.send(np.array([value]), f)
            acks = 0
            for f in sorted(alive):
                try:
                    comm.recv(f)
                    acks += 1
                except cluster.PeerCrashedError:
                    alive.discard(f)
            committed[i] = 2 * (1 + acks) > comm.size
        return committed
    log = []
    for _ in range(len(entries)):
        log.append(comm.recv(0)[0])
        comm.send(np.array([1], dtype=np.int8), 0)
    return np.array(log, dtype=np.float64)
    ### END SOLUTION


# %% [markdown]
# Replicate a few entries while follower 1 crashes before its first acknowledgement.

# %%
def run(comm, entries):
    return replicate(comm, entries if comm.rank == 0 else np.full(len(entries), np.nan))


try:
    values = np.arange(ENTRIES, dtype=np.float64)
    res = cluster.run(run, K, backend="sim", args=(values,), faults=cluster.Faults(crash={1: 0}))
    print("committed:", res.values[0])
    print("follower logs:", res.values[1:])
except cluster.RankError as err:
    print("replicate failed:", err.summary)

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(vector_clock_run, replicate)
