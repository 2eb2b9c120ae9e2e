# %% [markdown]
# # Lab 8: the elastic sampler, resuming an epoch when the number of ranks changes
#
# Chapter 8's sampler gives each of K ranks every K-th sample of the epoch's permutation, and its
# `start` lets a rank that crashed at sample i of its own list resume at sample i. That works only when
# the job comes back on the **same** K. Elastic training does not: a job of 4 ranks is preempted after
# 37 steps and comes back on 3 (or 5, or 8) spare accelerators, maybe several times in one epoch
# (Exercise 4 of the chapter asks which samples are still unread). On K' != K ranks, `start` skips the
# wrong samples: shrinking rereads some, growing never reads others. Here you write the sampler that
# resumes exactly when K changes, and the few integers the new ranks exchange to agree where to resume.
#
# **The tape.** For n samples, an epoch number and a seed, the epoch's order is
# `order = np.random.default_rng(seed + epoch).permutation(n)`, and the epoch is read along a *tape*
# whose position p holds `order[p % n]` (positions n, n+1, ... are the padding: the order again from its
# start, again and again if needed).
#
# **A run.** K ranks that start reading at tape position c (`consumed`: the job has read positions
# 0 .. c-1 of this epoch) each get L indices: L = ceil((n - c) / K), or floor((n - c) / K) with
# `drop_last=True`, and L = 0 once c >= n. Rank r's j-th index is the one at tape position
# **c + r + K j** (j = 0 .. L-1). A step of b samples per rank reads entries [t b, (t+1) b) of every
# list, so every completed step reads the next K b positions of the tape: the progress of a job is one
# number, c + K b (steps done), whatever K was. With c = 0 this is torch's `DistributedSampler` (and
# the chapter's `shard_indices`).
#
# **What the new ranks know.** Each rank of the old job saved, after every step it completed, one row
# `(epoch, start, K_old, done)`: the epoch, the tape position its run started at, its run's K, and how
# many entries of its own list it had completed (a rank that completes its list saves
# `(epoch + 1, 0, K_old, 0)`, so `start + K_old * done < n` always). A crash mid-step leaves the rows
# uneven: some ranks completed the step, others did not. Rank r of the new job reads the rows of old
# ranks r, r + K, r + 2K, ... (an array of shape (m, 4), m = 0 when K > K_old). The job resumes at the
# **smallest** progress `epoch * n + start + K_old * done` over all rows of all ranks (no row anywhere: a
# fresh job, epoch 0, position 0): `agree_progress` returns it as `[epoch, consumed]` on every rank.
#
# **The cost.** `resume_indices` sends nothing. `agree_progress` is one all-reduce of a few integers:
# by the grader's count each rank sends at most 2(K-1) messages of at most 2 int64 each (16 bytes plus
# the envelope of an array of at most 2 dimensions), and nothing when K = 1. Agree on a number, not on
# the rows: a rank may hold many.
#
# **Graded** (hidden tests, K = 1 to 9): `resume_indices` index for index with K unchanged and after a
# change (int64, n past 2**16, K larger than what is left, `consumed >= n`, `drop_last`); whole elastic
# epochs with one or several changes of K, replayed with `replay` below: every sample read exactly once
# (plus the stated padding, or a dropped tail shorter than the last K), equal counts; `agree_progress`
# on every rank, uneven rows, ranks without rows, rows in two epochs, progress past 2**31, and 2 real
# processes; its bytes. `scaleoutai.data.sampler`, `scaleoutai.data.storage`, `scaleoutai.collectives`
# and `scaleoutai.parallel` cannot be imported in the grader: write the all-reduce with `comm.send` and
# `comm.recv`.

# %% tags=["parameters"]
N = 1_002  # smoke: 23
K_OLD = 4  # smoke: 3
K_NEW = 3  # smoke: 2
BATCH = 8  # smoke: 2
STEPS = 5  # smoke: 2
SEED = 0

# %%
import numpy as np

from scaleoutai import cluster


# %%
def resume_indices(n, K, rank, epoch, seed, consumed, drop_last=False):
    """Rank ``rank`` of K's remaining int64 indices of ``epoch`` when the job has read ``consumed`` tape positions."""
    ### BEGIN SOLUTION
    if K < 1 or not 0 <= rank < K:
        raise ValueError(f"rank {rank} is not one of K={K} ranks")
    left = n - consumed  # tape positions still unread before the padding; <= 0: the epoch is over
    if left <= 0:
        return np.zeros(0, dtype=np.int64)
    length = left // K if drop_last else (left + K - 1) // K  # entries per rank, equal on every rank
    perm = np.random.default_rng(seed + epoch).permutation(n)
    tape = consumed + rank + K * np.arange(length, dtype=np.int64)  # c + r + K j
    return perm[tape % n].astype(np.int64)  # past n the tape starts the order again: the padding
    ### END SOLUTION


# %% [markdown]
# `replay` plays one epoch of an elastic job through your `resume_indices`: `runs` is a list of
# `(K, steps, batch)`, each run starting where the previous one stopped (its completed steps read
# K * steps * batch tape positions) and the last one (steps = -1) reading to the end of its lists. It
# returns one row `(run, rank, sample)` per sample read. The grader replays its own runs through it, so
# leave it as it is.

# %%
def replay(n, epoch, seed, drop_last, runs):
    consumed, reads = 0, [np.zeros((0, 3), dtype=np.int64)]
    for i, (K, steps, batch) in enumerate(runs):
        for r in range(K):
            mine = np.asarray(resume_indices(n, K, r, epoch, seed, consumed, drop_last)).astype(np.int64)
            mine = mine if steps < 0 else mine[:steps * batch]
            reads.append(np.stack([np.full(mine.size, i), np.full(mine.size, r), mine], axis=1).astype(np.int64))
        consumed += K * max(steps, 0) * batch
    return np.concatenate(reads)


# %% [markdown]
# `agree_progress` runs on every rank of the new job with the rows that rank read. It returns the same
# int64 array `[epoch, consumed]` on every rank (0 <= consumed < n): the smallest progress over all rows.
# Each rank can only reduce its own rows; the others' reach it in messages.

# %%
NOBODY = np.iinfo(np.int64).max  # the progress of a rank that holds no row: the identity of min


def agree_progress(comm, n, saved):
    """[epoch, consumed] where the job resumes, identical on every rank: one all-reduce (min) of one integer."""
    ### BEGIN SOLUTION
    rows = np.asarray(saved, dtype=np.int64).reshape(-1, 4)
    if rows.shape[0]:
        epochs, starts, k_olds, dones = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
        mine = int(np.min(epochs * n + starts + k_olds * dones))  # int64: epoch * n passes 2**31
    else:
        mine = NOBODY
    best = np.array([mine], dtype=np.int64)
    K, r, hop = comm.size, comm.rank, 1
    # Dissemination all-reduce: in round k a rank sends what it holds 2**k ranks ahead and keeps the smaller.
    # After ceil(log2 K) rounds every rank has the min over everybody: min does not mind counting a rank
    # twice, so K need not be a power of two.
    while hop < K:
        comm.send(best, (r + hop) % K)
        got = comm.recv((r - hop) % K)
        best = np.minimum(best, np.asarray(got, dtype=np.int64).reshape(1))
        hop *= 2
    total = int(best[0])
    if total == NOBODY:  # no rank held a row: a fresh job
        return np.zeros(2, dtype=np.int64)
    return np.array([total // n, total % n], dtype=np.int64)
    ### END SOLUTION


# %% [markdown]
# Try it. First a whole epoch with two changes of K: every sample read once, plus fewer than K repeats
# of padding. Then the old job of `K_OLD` ranks crashes during step `STEPS`, after only 2 of its ranks
# completed it; the new job of `K_NEW` ranks agrees where to resume and finishes the epoch.

# %% tags=["demo"]
def resume_rank(comm, n, seed, drop_last, saved_by_rank):
    epoch, consumed = agree_progress(comm, n, saved_by_rank[comm.rank])
    return int(epoch), resume_indices(n, comm.size, comm.rank, int(epoch), seed, int(consumed), drop_last)


try:
    runs = [(K_OLD, STEPS, BATCH), (K_NEW, 1, BATCH), (K_OLD + 3, -1, BATCH)]
    counts = np.bincount(replay(N, 0, SEED, False, runs)[:, 2], minlength=N)
    print(f"runs {runs}: every sample read: {bool(counts.min() >= 1)}, read twice: {int((counts > 1).sum())}")
    assert counts.min() == 1 and counts.sum() - N < runs[-1][0]

    done = [(STEPS + (i < 2)) * BATCH for i in range(K_OLD)]  # ranks 0 and 1 completed step STEPS
    rows = np.array([[1, 0, K_OLD, d] for d in done], dtype=np.int64)
    saved_by_rank = [rows[r::K_NEW] for r in range(K_NEW)]
    res = cluster.run(resume_rank, K_NEW, backend="sim", args=(N, SEED, False, saved_by_rank), timeout=60)
    assert {e for e, _ in res.values} == {1}
    old = [resume_indices(N, K_OLD, r, 1, SEED, 0)[:STEPS * BATCH] for r in range(K_OLD)]
    counts = np.bincount(np.concatenate(old + [mine for _, mine in res.values]), minlength=N)
    print(f"after the crash: every sample read: {bool(counts.min() >= 1)}, read twice: {int((counts > 1).sum())}; "
          f"bytes sent per rank: {[s.bytes_sent for s in res.stats]}")
    assert counts.min() == 1 and counts.sum() - N < K_NEW
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
