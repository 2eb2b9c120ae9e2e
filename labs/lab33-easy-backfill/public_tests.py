"""Public tests for lab 33: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _busy_ok(cpus, gpus, jobs, runtimes, start):
    end = start + np.minimum(runtimes, jobs[:, 3])
    assert np.isfinite(start).all(), "every job must start"
    assert (start >= jobs[:, 0]).all(), "a job started before it was submitted"
    for col, cap, name in ((1, cpus, "CPUs"), (2, gpus, "GPUs")):
        for t in start:
            used = jobs[(start <= t) & (end > t), col].sum()
            assert used <= cap, f"{used} {name} in use at t={t} on a machine of {cap}"


def _worker(comm, cpus, gpus, jobs, runtimes, owners, easy_cluster):
    ids = np.flatnonzero(owners == comm.rank)
    return easy_cluster(comm, cpus, gpus, np.column_stack([ids, jobs[ids]]), runtimes[ids])


NOTE = ("public tests passed; the grader compares with its own simulator on hidden traces (integer and float "
        "times, kills), checks the head's reservation at every event, and reads the controller's messages")


@check
def backfill_decisions(EasyBackfill2):
    # 4 CPUs, 2 GPUs. Job 0 holds both GPUs until 10; the head (job 1) needs a GPU: shadow 10, extra 3 CPUs and
    # 1 GPU. Job 2 (2 CPUs, no GPU, limit 20) fits in the extra and backfills; job 3 no longer fits anywhere.
    s = EasyBackfill2(4, 2)
    for j, (c, g, lim) in enumerate([(2, 2, 10), (1, 1, 5), (2, 0, 20), (1, 0, 3)]):
        s.submit(j, 0, c, g, lim)
    assert list(s.decide(0)) == [0, 2], "decide(0): job 0 starts, then job 2 backfills into the head's extra"
    s.finish(0, 10)
    assert list(s.decide(10)) == [1, 3], "decide(10): the head starts, then job 3 fits"


@check
def replay_starts_and_kills(replay):
    jobs = np.array([[0, 2, 2, 10], [0, 1, 1, 5], [0, 2, 0, 20], [0, 1, 0, 3]])
    got = replay(4, 2, jobs, np.array([10, 5, 20, 3]))
    assert np.asarray(got).dtype == np.float64 and np.array_equal(got, [0, 10, 0, 10]), f"replay: {got}"
    # job 0 runs past its limit of 4 and is killed at 4: the 2-CPU job 1 then starts at 4, not 9
    got = replay(2, 0, np.array([[0, 2, 0, 4], [1, 2, 0, 5]]), np.array([9, 1]))
    assert np.array_equal(got, [0, 4]), "a job that reaches its limit is killed there (ends at s + min(r, l))"
    assert replay(3, 1, np.zeros((0, 4)), np.zeros(0)).shape == (0,), "an empty trace has no start times"


@check
def random_traces_and_cluster(replay, easy_cluster):
    rng = np.random.default_rng(7)
    for n, cpus, gpus in ((25, 6, 2), (40, 16, 4)):
        jobs = np.stack([np.sort(rng.integers(0, 60, n)), rng.integers(1, cpus + 1, n),
                         rng.integers(0, gpus + 1, n), rng.integers(2, 12, n)], axis=1)
        runtimes = rng.integers(1, 14, n)  # some past their limit
        start = np.asarray(replay(cpus, gpus, jobs, runtimes))
        _busy_ok(cpus, gpus, jobs, runtimes, start)
        for K in (1, 3):
            owners = rng.integers(0, K, n)
            res = cluster.run(_worker, K, args=(cpus, gpus, jobs, runtimes, owners, easy_cluster), timeout=60)
            both = np.full(n, np.nan)
            for r in range(K):
                both[owners == r] = res.values[r]
            assert np.array_equal(both, start), f"K={K}: easy_cluster's starts differ from replay's"
