"""Chapter 18: atomic checkpoints survive a crash mid-write, resume equals the uninterrupted run, re-sharding."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.parallel import elastic
from scaleoutai.nn import flatten, mlp_backward, mlp_forward, mlp_init, mse_loss, unflatten

SIZES = [4, 8, 2]


def _state(v: float) -> dict:
    return {"w": np.full((3, 4), v), "opt": {"m": np.arange(5, dtype=np.float32) * v, "t": 7},
            "shards": [np.ones(2, dtype=np.int64), np.zeros((0,))], "step": 3}


def test_checkpoint_roundtrip_keeps_nesting_lists_and_dtypes(tmp_path):
    path = tmp_path / "a.npz"
    elastic.save_checkpoint(path, _state(2.0))
    got = elastic.load_checkpoint(path)
    np.testing.assert_array_equal(got["w"], np.full((3, 4), 2.0))
    assert got["opt"]["m"].dtype == np.float32 and got["opt"]["t"] == 7 and got["step"] == 3
    assert [s.shape for s in got["shards"]] == [(2,), (0,)] and got["shards"][0].dtype == np.int64
    assert os.listdir(tmp_path) == ["a.npz"]  # no temp file left behind


def test_exception_mid_write_leaves_old_checkpoint_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "c.npz"
    elastic.save_checkpoint(path, _state(1.0))
    real = np.savez

    def torn(f, **arrays):  # writes half of the archive, then the "machine" fails
        import io
        buf = io.BytesIO()
        real(buf, **arrays)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", torn)
    with pytest.raises(OSError, match="disk full"):
        elastic.save_checkpoint(path, _state(9.0))
    monkeypatch.undo()
    np.testing.assert_array_equal(elastic.load_checkpoint(path)["w"], np.full((3, 4), 1.0))
    assert os.listdir(tmp_path) == ["c.npz"]


_KILL_MID_WRITE = """
import io, os, sys
import numpy as np
from scaleoutai.parallel import elastic
real = np.savez
def torn(f, **arrays):
    buf = io.BytesIO(); real(buf, **arrays)
    f.write(buf.getvalue()[: len(buf.getvalue()) // 2]); f.flush()
    os._exit(9)  # power loss: no cleanup, no exception handlers
np.savez = torn
save = elastic.save_checkpoint if sys.argv[2] == "atomic" else elastic.save_checkpoint_naive
save(sys.argv[1], {"w": np.full((3, 4), 9.0), "step": 8})
"""


@pytest.mark.parametrize("writer", ["atomic", "naive"])
def test_process_killed_mid_write(tmp_path, writer):
    elastic.save_checkpoint(elastic.checkpoint_path(tmp_path, 4), {"w": np.full((3, 4), 1.0), "step": 4})
    elastic.save_checkpoint(elastic.checkpoint_path(tmp_path, 8), {"w": np.full((3, 4), 2.0), "step": 8})
    target = elastic.checkpoint_path(tmp_path, 8)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILL_MID_WRITE), target, writer], timeout=60)
    assert proc.returncode == 9
    if writer == "atomic":  # the old file is intact; the torn temp file is ignored
        assert any(n.endswith(".tmp") for n in os.listdir(tmp_path))
        np.testing.assert_array_equal(elastic.load_checkpoint(target)["w"], np.full((3, 4), 2.0))
        assert elastic.latest_checkpoint(tmp_path)[0] == 8
    else:  # writing in place destroyed step 8: it no longer loads, and resume falls back to step 4
        with pytest.raises(ValueError, match="unreadable"):
            elastic.load_checkpoint(target)
        step, state = elastic.latest_checkpoint(tmp_path)
        assert step == 4 and state["w"][0, 0] == 1.0


def test_missing_checkpoint_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        elastic.load_checkpoint(tmp_path / "none.npz")
    assert elastic.latest_checkpoint(tmp_path / "nowhere") is None


def _toy_step(state: dict, s: int) -> dict:
    rng = np.random.default_rng(s)  # the step's data depends on s only: replaying a step is deterministic
    return {"w": state["w"] * 0.9 + rng.standard_normal(3), "n": state["n"] + 1}


def test_train_with_checkpoints_resumes_and_equals_uninterrupted(tmp_path):
    def init():
        return {"w": np.zeros(3), "n": 0}

    ref, start = elastic.train_with_checkpoints(_toy_step, init, 10, tmp_path / "ref", every=3)
    assert start == 0 and ref["n"] == 10

    def crashing(state, s):
        if s == 7:
            raise RuntimeError("node lost")
        return _toy_step(state, s)

    with pytest.raises(RuntimeError, match="node lost"):
        elastic.train_with_checkpoints(crashing, init, 10, tmp_path / "run", every=3)
    got, start = elastic.train_with_checkpoints(_toy_step, init, 10, tmp_path / "run", every=3, keep=2)
    assert start == 6 and got["n"] == 10
    np.testing.assert_array_equal(got["w"], ref["w"])
    assert sorted(os.listdir(tmp_path / "run")) == ["ckpt-00000009.npz", "ckpt-00000010.npz"]


@pytest.mark.parametrize("shape", [(23,), (10, 3), (2,)])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_reshard_preserves_order_and_values_for_any_K_to_K_new(K, shape):
    full = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    shards = np.array_split(full, K)
    for K_new in (1, 2, 3, 5, 8, 30):
        new = elastic.reshard(shards, K_new)
        assert [s.shape for s in new] == [s.shape for s in np.array_split(full, K_new)]
        np.testing.assert_array_equal(np.concatenate(new), full)
        np.testing.assert_array_equal(np.concatenate(elastic.reshard(new, K)), full)


def test_reshard_rejects_bad_input():
    with pytest.raises(ValueError, match="K_new"):
        elastic.reshard([np.ones(3)], 0)
    with pytest.raises(ValueError, match="trailing shapes"):
        elastic.reshard([np.ones((2, 3)), np.ones((2, 4))], 2)


def _reference(X, Y, n_steps, batch, lr=0.05, mu=0.9, seed=0):
    """Single-device momentum SGD on the same per-step batches."""
    params = mlp_init(SIZES, seed=seed, dtype=X.dtype)
    w, mom = flatten(params), np.zeros(sum(v.size for v in params.values()), dtype=X.dtype)
    for s in range(n_steps):
        idx = np.random.default_rng([seed, s]).choice(len(X), batch, replace=False)
        p = unflatten(w, params)
        y, cache = mlp_forward(p, X[idx])
        _, g = mlp_backward(p, cache, mse_loss(y, Y[idx])[1])
        mom = mu * mom + flatten(g)
        w = w - lr * mom
    return unflatten(w, params)


def _data(dtype=np.float64):
    rng = np.random.default_rng(0)
    return rng.standard_normal((40, 4)).astype(dtype), rng.standard_normal((40, 2)).astype(dtype)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 12])  # batch 10 < 12 ranks: two ranks get no rows
def test_sharded_momentum_training_equals_single_device(tmp_path, K, dtype, tol):
    X, Y = _data(dtype)
    res = elastic.elastic_train(X, Y, SIZES, 9, 10, str(tmp_path), every=4, K=K)
    ref = _reference(X, Y, 9, 10)
    assert res.restarts == 0
    for k in ref:
        assert res.params[k].dtype == dtype
        np.testing.assert_allclose(res.params[k], ref[k], rtol=tol, atol=tol)


@pytest.mark.parametrize("K, crash, K_after", [(3, {1: 30}, None), (2, {0: 9}, None), (5, {4: 40}, 3),
                                               (3, {2: 26}, 8), (4, {1: 30}, 1)])
def test_crashed_run_resumes_from_checkpoint_and_matches_uninterrupted(tmp_path, K, crash, K_after):
    X, Y = _data()
    ref = elastic.elastic_train(X, Y, SIZES, 12, 10, str(tmp_path / "ref"), every=4, K=K)
    got = elastic.elastic_train(X, Y, SIZES, 12, 10, str(tmp_path / "run"), every=4, K=K,
                           faults=cluster.Faults(crash=crash), K_after=K_after)
    assert got.restarts == 1 and got.resumed_from[0] == 0 and got.resumed_from[1] > 0, got
    assert got.world_sizes == [K, K_after or K]
    for k in ref.params:
        if K_after is None:  # same world size: the replay is bit for bit the same computation
            np.testing.assert_array_equal(got.params[k], ref.params[k])
        else:  # re-sharded onto K' ranks: the gradient sums round differently
            np.testing.assert_allclose(got.params[k], ref.params[k], rtol=1e-12, atol=1e-12)


def test_a_bug_is_raised_not_restarted(tmp_path):
    X, Y = _data()
    with pytest.raises(cluster.RankError, match="matmul|shapes"):
        elastic.elastic_train(X, Y, [3, 8, 2], 4, 10, str(tmp_path), every=2, K=2)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_crash_and_resume_on_real_processes(tmp_path):
    X, Y = _data()
    got = elastic.elastic_train(X, Y, SIZES, 12, 10, str(tmp_path), every=4, K=2, backend="process",
                           faults=cluster.Faults(crash={1: 20}), timeout=120)
    assert got.restarts == 1 and got.resumed_from[1] == 8
    ref = _reference(X, Y, 12, 10)
    for k in ref:
        np.testing.assert_allclose(got.params[k], ref[k], rtol=1e-12, atol=1e-12)
