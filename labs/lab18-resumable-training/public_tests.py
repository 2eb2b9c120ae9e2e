"""Public tests for lab 18: run them from the notebook's last cell. The grader runs more, hidden ones."""
import os
import tempfile

import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _uninterrupted(data, w, steps, lr, mu=0.9):
    X, y = data[:, :-1], data[:, -1]
    m = np.zeros_like(w)
    for _step in range(steps):
        res = (X * w).sum(axis=1) - y
        m = mu * m + (X * res[:, None]).sum(axis=0)
        w = w - lr * m
    return np.stack([w, m])


def _run(train_sharded, data, w0, steps, lr, ckpt, every, K, faults=None):
    blocks = np.array_split(w0, K)
    args = tuple((data, blocks[r], steps, lr, ckpt, every) for r in range(K))
    return cluster.run(lambda comm, *a: train_sharded(comm, *a[comm.rank]), K, backend="sim", args=args,
                       faults=faults, timeout=30)


NOTE = ("public tests passed; the grader also tries K up to 8, more ranks than parameters, float32, torn "
        "manifests, missing shards and an interrupted write")


@check
def atomic_write_replaces(atomic_write):
    """atomic_write"""
    folder = tempfile.mkdtemp(prefix="lab18-")
    path = os.path.join(folder, "file.bin")
    atomic_write(path, b"old")
    atomic_write(path, b"new bytes")
    with open(path, "rb") as f:
        assert f.read() == b"new bytes", "atomic_write should leave the new content"
    assert os.listdir(folder) == ["file.bin"], "atomic_write leaves exactly one file behind"


def _setup():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((8, 6))
    w0, steps, lr, every = 0.1 * rng.standard_normal(5), 7, 0.02, 3
    return data, w0, steps, lr, every, _uninterrupted(data, w0, steps, lr)


@check
def clean_run_and_checkpoints(train_sharded, inspect_checkpoints):
    """train_sharded, K=2, no crash; checkpoints of steps 3 and 6 verify"""
    data, w0, steps, lr, every, want = _setup()
    ckpt = os.path.join(tempfile.mkdtemp(prefix="lab18-"), "clean")
    res = _run(train_sharded, data, w0, steps, lr, ckpt, every, 2)
    got = np.concatenate(res.values, axis=1)
    assert np.array_equal(got, want), "K=2, no crash: the blocks should equal the single-machine run bit for bit"
    table = inspect_checkpoints(ckpt, 5)
    assert table[:, :4].tolist() == [[3, 1, 2, 1], [6, 1, 2, 1]], \
        "step folders 3 and 6 should be committed by K=2 ranks and verify"


@check
def crash_restart_and_damage(train_sharded, damage):
    """a crash on 2 ranks, a restart on 3 from step 3; a damaged shard is caught and the restart falls back"""
    data, w0, steps, lr, every, want = _setup()
    ckpt = os.path.join(tempfile.mkdtemp(prefix="lab18-"), "crashed")
    try:  # rank 1: one flag message, one block per step, a digest after step 3; it dies in step 6
        _run(train_sharded, data, w0, steps, lr, ckpt, every, 2, cluster.Faults(crash={1: 1 + 5 + 1}))
        raise AssertionError("the crashed run should have failed")
    except cluster.RankError:
        pass
    res = _run(train_sharded, data, w0, steps, lr, ckpt, every, 3)
    assert np.array_equal(np.concatenate(res.values, axis=1), want), "K=2 -> K'=3: not the uninterrupted run"
    assert res.stats[0].messages_sent == 2 * (1 + steps - 3), "the restart on 3 ranks should resume from step 3"

    damage(os.path.join(ckpt, "step-00000006", "shard-00001.npy"), "flip")
    res = _run(train_sharded, data, w0, steps, lr, ckpt, every, 2)
    assert np.array_equal(np.concatenate(res.values, axis=1), want), "after a flipped bit: not the uninterrupted run"
    assert res.stats[0].messages_sent == 1 + steps - 3, \
        "a shard of step 6 was damaged: the restart should verify it and resume from step 3"
