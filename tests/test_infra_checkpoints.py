"""Chapter 35: checkpoint integrity: sharded checkpoints with a signed manifest, damage refused naming the
shard, and a crash mid-save that falls back to the last verified step."""
from __future__ import annotations

import json

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.infra import reliability as rl

KEY = b"chapter-35-test-key-0123456789ab"


def _shards():
    rng = np.random.default_rng(20)
    return [rng.standard_normal((4, 3)), rng.standard_normal(7).astype(np.float32), np.arange(5),
            rng.standard_normal((2, 2))]


def test_a_sharded_checkpoint_round_trips_and_leaves_no_temp_files(tmp_path):
    shards = _shards()
    rl.write_sharded_checkpoint(tmp_path, shards, KEY, meta={"step": 3})
    got, meta = rl.load_sharded_checkpoint(tmp_path, KEY)
    assert meta == {"step": 3} and all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, shards))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"shard-0000{i}.npy" for i in range(4)]
                                                                + ["MANIFEST.json"])


@pytest.mark.parametrize("damage,match", [
    ("flip", "shard-00002.npy does not match its sha256 in the manifest \\(corrupted\\)"),
    ("truncate", "shard-00001.npy has .* bytes, the manifest says"),
    ("swap", "shard-00000.npy holds the content of shard-00003.npy \\(shards swapped\\)"),
    ("delete", "shard-00001.npy is missing"),
    ("forge", "HMAC does not match"), ("torn_manifest", "not a complete manifest"),
    ("no_manifest", "never committed")])
def test_a_damaged_checkpoint_is_refused_naming_the_shard(tmp_path, damage, match):
    shards = _shards()
    rl.write_sharded_checkpoint(tmp_path, shards, KEY)
    path = lambda i: tmp_path / f"shard-0000{i}.npy"  # noqa: E731
    man = tmp_path / "MANIFEST.json"
    if damage == "flip":
        data = bytearray(path(2).read_bytes())
        data[-1] ^= 1
        path(2).write_bytes(bytes(data))
    elif damage == "truncate":
        path(1).write_bytes(path(1).read_bytes()[:-5])
    elif damage == "swap":
        a, b = path(0).read_bytes(), path(3).read_bytes()
        path(0).write_bytes(b)
        path(3).write_bytes(a)
    elif damage == "delete":
        path(1).unlink()
    elif damage == "forge":  # rewrite shard 2 and its hash and size in the manifest, without the key
        import hashlib
        import io
        buf = io.BytesIO()
        np.save(buf, np.zeros(5, dtype=np.int64))
        path(2).write_bytes(buf.getvalue())
        m = json.loads(man.read_text())
        m["shards"][2].update(sha256=hashlib.sha256(buf.getvalue()).hexdigest(), bytes=len(buf.getvalue()))
        man.write_text(json.dumps(m))
    elif damage == "torn_manifest":
        man.write_text(man.read_text()[:40])
    else:
        man.unlink()
    with pytest.raises(rl.IntegrityError, match=match):
        rl.load_sharded_checkpoint(tmp_path, KEY)


def test_the_wrong_key_and_a_short_key_are_refused(tmp_path):
    rl.write_sharded_checkpoint(tmp_path, _shards(), KEY)
    with pytest.raises(rl.IntegrityError, match="HMAC"):
        rl.load_sharded_checkpoint(tmp_path, b"another-key-of-32-bytes-00000000")
    with pytest.raises(ValueError, match="at least 16"):
        rl.write_sharded_checkpoint(tmp_path, _shards(), b"short")


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_distributed_save_then_load_gives_each_rank_its_shard(tmp_path, K):
    shards = [np.full(r + 2, float(r)) for r in range(K)]
    cluster.run(lambda c: rl.save_sharded(c, tmp_path, shards[c.rank], KEY, {"step": 1}), K, timeout=10)
    res = cluster.run(lambda c: rl.load_sharded(c, tmp_path, KEY), K, timeout=10)
    assert all(np.array_equal(res.values[r], shards[r]) for r in range(K))
    assert all(np.array_equal(a, b) for a, b in zip(rl.load_sharded_checkpoint(tmp_path, KEY)[0], shards))


def test_a_rank_crashing_mid_save_leaves_no_commit_and_the_previous_step_is_loaded(tmp_path):
    K = 4
    old = [np.full(3, 1.0 + r) for r in range(K)]
    cluster.run(lambda c: rl.save_sharded(c, rl.step_folder(tmp_path, 10), old[c.rank], KEY, {"step": 10}),
                K, timeout=10)
    new = [np.full(3, 9.0 + r) for r in range(K)]
    with pytest.raises(cluster.RankError):
        cluster.run(lambda c: rl.save_sharded(c, rl.step_folder(tmp_path, 20), new[c.rank], KEY),
                    K, faults=cluster.Faults(crash={2: 0}), timeout=10)
    assert not (rl.step_folder(tmp_path, 20) / "MANIFEST.json").exists()
    step, shards, meta, refused = rl.latest_verified(tmp_path, KEY)
    assert step == 10 and meta == {"step": 10} and all(np.array_equal(a, b) for a, b in zip(shards, old))
    assert len(refused) == 1 and "never committed" in refused[0]
