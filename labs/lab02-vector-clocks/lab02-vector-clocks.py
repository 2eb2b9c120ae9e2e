# %% [markdown]
# # Lab 2: causal broadcast with vector timestamps
#
# Chapter 2 gives every event a vector clock and shows that the clocks decide happened-before exactly:
# `run_clocks` stamps each event, and `happened_before` compares two stamps after the run. What the
# chapter does not do is *act* on that knowledge while the run is going. A group chat, a replicated
# key-value store or a parameter server whose updates depend on earlier updates needs more: a rank must
# never apply a message before the messages that caused it, even when the network hands them over in
# another order. That is **causal broadcast** (Birman, Schiper and Stephenson, 1991), and you build it
# here, on the simulated cluster.
#
# **The protocol.** Each rank i keeps `delivered`, K int64 counters: `delivered[k]` is how many of rank
# k's broadcasts rank i has delivered (its own included).
#
# * To broadcast, rank i increments `delivered[i]`, sends a copy of `delivered` (the message's
#   *vector timestamp* W) to every other rank, in any order, and delivers its own message at once.
# * A message that arrives from rank j with timestamp W goes into a **hold-back queue**. It may be
#   delivered when W[j] == delivered[j] + 1 (it is j's next message) and W[k] <= delivered[k] for every
#   k != j (everything j had delivered when it broadcast, this rank has delivered too). Delivering it sets
#   `delivered[j] += 1`, which may make other held messages deliverable: keep delivering until none is.
#
# Notice that the timestamp counts *broadcasts delivered*, not events: a receive that is still held back,
# or a delivery, is not a tick of anyone's entry. The chapter's vector clock (tick on every event, merge
# on every receive) orders events; pasted here, it would make a message wait for receives that were never
# broadcast, or be delivered the moment it arrives, before its causes.
#
# **What the grader gives you.** `causal_broadcast(comm, script)` gets this rank's script, one int64 row
# `(kind, peer)` per step: kind 0 is "broadcast a new message" (peer is unused), kind 1 is "receive the
# next message from `peer`" (`comm.recv(peer)`). Links are FIFO, but the grader chooses which link a rank
# reads next, so a message can arrive before a message it depends on that travels on another link. Every
# broadcast reaches every rank by the end of the script. Return an int64 array of shape (n, 2): the
# messages in the order this rank delivered them, each as `(sender, seq)`, where seq = 1, 2, ... numbers
# the sender's broadcasts (seq = W[sender]); a rank that delivers nothing returns shape (0, 2). Within one
# burst of deliveries (after one arrival) any order that keeps causality is accepted.
#
# `deliverable(stamp, delivered, sender)` is the rule alone: True when a message from `sender` with
# timestamp `stamp` may be delivered at a rank whose counters are `delivered`.
#
# **What is graded.** The rule on hand-built and random stamps; what every rank has delivered after
# every step of its script, against the grader's own replay of the protocol (as soon as possible and
# never before the message's causes), on schedules where the messages arrive in causal order and on
# seeded schedules that reorder them, for K = 1 to 7, ranks that never broadcast, no broadcast at all,
# and sequence numbers past what 8 bits count; 2 real processes; and, from the messages the grader
# records (not your `comm.stats`), exactly one int64 message of K entries per broadcast and other rank,
# equal to the timestamp above. `scaleoutai.foundations.clocks` and `scaleoutai.foundations.consensus`
# cannot be imported in the grader: write the protocol with numpy and `comm.send`/`comm.recv` only.

# %% tags=["parameters"]
K = 4  # smoke: 3
BROADCASTS = 12  # smoke: 6
SEED = 2

# %%
import numpy as np

from scaleoutai import cluster


# %%
def deliverable(stamp, delivered, sender):
    """May a message from ``sender`` with vector timestamp ``stamp`` be delivered now?"""
    ### BEGIN SOLUTION
    ahead = np.asarray(stamp, dtype=np.int64) - np.asarray(delivered, dtype=np.int64)
    if ahead[sender] != 1:  # not the sender's next message: delivered already, or an earlier one is missing
        return False
    ahead[sender] = 0
    return bool(ahead.max() <= 0)  # every cause from a third rank is delivered here
    ### END SOLUTION


# %%
def causal_broadcast(comm, script):
    """Run this rank's script; return its deliveries in order as rows (sender, seq), int64, shape (n, 2)."""
    ### BEGIN SOLUTION
    me, size = comm.rank, comm.size
    delivered = np.zeros(size, dtype=np.int64)
    held = []  # (sender, stamp) in arrival order: the hold-back queue
    log = []
    for kind, peer in np.asarray(script, dtype=np.int64).reshape(-1, 2):
        if kind == 0:  # a broadcast: count it, deliver it here, then the counts travel as its timestamp
            delivered[me] += 1
            log.append((me, int(delivered[me])))
            for step in range(1, size):
                comm.send(delivered, (me + step) % size)  # send copies the array
            continue
        sender = int(peer)
        held.append((sender, np.asarray(comm.recv(sender), dtype=np.int64).copy()))
        progress = True
        while progress:  # one delivery can release messages that waited for it
            progress = False
            for i, (j, stamp) in enumerate(held):
                if deliverable(stamp, delivered, j):
                    delivered[j] += 1
                    log.append((j, int(stamp[j])))
                    del held[i]
                    progress = True
                    break
    return np.array(log, dtype=np.int64).reshape(len(log), 2)
    ### END SOLUTION


# %% [markdown]
# A schedule that reorders: rank 0 broadcasts m1, rank 1 delivers m1 and answers with m2, and rank 2
# reads rank 1's link first. m2 must wait in rank 2's hold-back queue until m1 arrives.

# %% tags=["demo"]
scripts = [np.array([[0, 0]]), np.array([[1, 0], [0, 0]]), np.array([[1, 1], [1, 0]])]
res = cluster.run(lambda comm: causal_broadcast(comm, scripts[comm.rank]), 3, backend="sim")
print("rank 2 delivered:", res.values[2].tolist())
assert res.values[2].tolist() == [[0, 1], [1, 1]], "m2 (1, 1) was delivered before its cause m1 (0, 1)"


# %% [markdown]
# A random run on K ranks: a global order of broadcasts and arrivals where each arrival reads a random
# non-empty link, projected to one script per rank (so no rank waits for a message never sent).

# %% tags=["demo"]
def random_scripts(k_, n, rng):
    links = {(a, b): [] for a in range(k_) for b in range(k_) if a != b}  # messages in flight per link
    script = [[] for _ in range(k_)]
    left = n
    while left or any(links.values()):
        busy = [ab for ab, q in links.items() if q]
        if left and (not busy or rng.random() < 0.4):
            a = int(rng.integers(k_))
            script[a].append((0, 0))
            for b in range(k_):
                if b != a:
                    links[(a, b)].append(1)
            left -= 1
        else:
            a, b = busy[int(rng.integers(len(busy)))]
            links[(a, b)].pop()
            script[b].append((1, a))
    return [np.array(s, dtype=np.int64).reshape(-1, 2) for s in script]


scripts = random_scripts(K, BROADCASTS, np.random.default_rng(SEED))
res = cluster.run(lambda comm: causal_broadcast(comm, scripts[comm.rank]), K, backend="sim")
for r, log in enumerate(res.values):
    assert len(log) == BROADCASTS, f"rank {r} delivered {len(log)} of {BROADCASTS} messages"
print(f"K={K}: every rank delivered all {BROADCASTS} messages; rank 0's order:", res.values[0].tolist())

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
