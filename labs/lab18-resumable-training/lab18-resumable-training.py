# %% [markdown]
# # Lab 18: a sharded checkpoint that resumes on a different number of ranks
#
# Chapter 18 checkpoints the ZeRO-1 momentum by **gathering** every block to rank 0, which writes one
# file while the others wait, and resumes on K' ranks by reading that whole file and re-splitting it
# (`reshard`). It then notes that production systems write in parallel instead: every rank its own
# shard plus a metadata file, as `torch.distributed.checkpoint` does, so the write bandwidth grows with
# K and no optimizer state crosses the network. This lab builds that checkpoint from scratch, with the
# two properties a gathered file gets for free and a sharded one must earn:
#
# **Commit and integrity.** A checkpoint is now K files written by K processes, any of which may die
# half-way. Rank r writes `step-<8 digits>/shard-<r, 5 digits>.npy` atomically (a temporary file in the
# same folder, `flush`, `fsync`, `os.replace`) and sends rank 0 only the **sha256 of its file** (32
# bytes); rank 0 writes `manifest.json` last, atomically, once every digest has arrived. The manifest is
# the commit point: a step folder without one was never committed and is ignored. A shard that was
# damaged later (a flipped bit, a truncated or missing file) no longer matches its checksum, and a
# checkpoint with such a shard must not be used.
#
# **Re-sharding from the shards.** A job restarted on K' ranks gives rank r' the block
# `np.array_split` assigns it under K'. It reads only the old shards whose ranges overlap that block,
# verifies each against the manifest and copies the overlapping slice. Since each rank verifies only
# part of a checkpoint, the ranks must **agree** on which checkpoint to resume from: a checkpoint is
# usable only if every rank could read its block from it.
#
# Training is heavy-ball momentum on (1/2)||A w - b||^2 with both the parameters w and the momentum m
# sharded (rank r holds rows `lo:hi` of each, see `block`). The gradient is given: every rank computes
# the same full `gradient(A, b, w)` (think of it as the data-parallel all-reduce the chapter already
# covered), so the run does not depend on K and a resume on K' ranks can be compared **bit for bit**:
#
#     w_full = all_gather(comm, w)        # the only message of a step: my block to every other rank
#     g = gradient(A, b, w_full)[lo:hi]
#     m = MU * m + g;  w = w - lr * m     # m_0 = 0, w_0 = the block of params0
#
# You write four functions:
#
# * `atomic_write(path, data)`: write the bytes `data` to `path` so that `path` holds the old content or
#   the new, never a mix; on an error delete the temporary file and re-raise.
# * `write_checkpoint(comm, ckpt_dir, step, state, n)`: `state` is this rank's (2, hi - lo) array
#   `[w; m]`. Every rank writes its shard with `np.save` (atomically) and ranks r > 0 send rank 0 the
#   32-byte sha256 digest of the file's bytes as a `uint8` array. Rank 0 then writes `manifest.json`:
#   `{"step": step, "n": n, "world_size": K, "dtype": "float64", "shards": [{"file": "shard-00000.npy",
#   "lo": 0, "hi": 4, "sha256": "<hex digest>"}, ...]}` (one entry per rank, in rank order).
# * `load_resharded(comm, ckpt_dir, n, dtype)`: `(step, state)` of the newest checkpoint that **every**
#   rank can read its block of, `state` being this rank's (2, hi - lo) block under `comm.size` ranks,
#   or `(0, None)`. Candidates are the step folders whose manifest loads. For each candidate, read only the
#   shards that overlap your block, check each file's sha256 against the manifest (and that it loads
#   with shape (2, hi - lo) of the shard and the right dtype), and put a 1 or 0 in an `int8` flag array
#   (one flag per candidate, newest first). Then agree with **one** `all_gather` of the flags (always,
#   even with no candidate) and take the newest candidate flagged 1 by every rank.
# * `train_sharded(comm, data, w0, steps, lr, ckpt_dir, every)`: `data` is `[A | b]` (every rank holds
#   it), `w0` this rank's block of params0. Create `ckpt_dir`, resume with `load_resharded`, run the
#   remaining steps, and after every step s + 1 that is a multiple of `every` call `write_checkpoint`.
#   Return this rank's final `np.stack([w, m])` in the dtype of `w0`.
#
# **What the grader checks.** It crashes ranks (`cluster.Faults`: rank r dies at its (n+1)-th send: in
# a step, between writing its shard and sending its digest, ...), damages the newest checkpoint (a
# flipped byte, a truncated or deleted shard, a torn manifest, shards damaged in two checkpoints),
# restarts on the same K and on K' != K (up to 8 ranks, more ranks than parameters), and compares every
# rank's block with its own uninterrupted run **bit for bit** (float32 and float64). It counts the steps
# the restart ran from the messages it recorded, so a restart must resume from the newest checkpoint
# that verifies, and it reads each rank's flags: 1 exactly for the checkpoints whose shards overlapping
# that rank's block verify. It reads the step folders with `inspect_checkpoints` (given), and it records every
# message: per step one block to each other rank, per checkpoint one 32-byte digest from each rank to
# rank 0, one flag array to each other rank at the start, and nothing else (no state crosses the
# network). It also kills `atomic_write` at a chosen byte of the file. `scaleoutai.parallel` and
# `scaleoutai.infra` (the chapter's checkpoints) are unimportable in the grader.

# %% tags=["parameters"]
K = 4  # smoke: 3
K_AFTER = 3  # smoke: 2
STEPS = 30  # smoke: 12
EVERY = 5  # smoke: 4

# %%
import contextlib
import hashlib
import io
import json
import os
import re
import tempfile

import numpy as np

from scaleoutai import cluster

MU = 0.9  # heavy-ball momentum
MANIFEST = "manifest.json"


def block(n, K, r):
    """Given: rank r's rows lo:hi of an n-vector split over K ranks, as np.array_split splits it."""
    q, extra = divmod(n, K)
    lo = r * q + min(r, extra)
    return lo, lo + q + (r < extra)


def step_dir(ckpt_dir, step):
    """Given: the folder of the checkpoint of step ``step``."""
    return os.path.join(ckpt_dir, f"step-{int(step):08d}")


def shard_file(r):
    """Given: the file name of rank r's shard inside a step folder."""
    return f"shard-{int(r):05d}.npy"


def gradient(A, b, w):
    """Given: A^T (A w - b) with NumPy's own sums (no BLAS), so every rank and the grader get the same bits."""
    res = (A * w).sum(axis=1) - b
    return (A * res[:, None]).sum(axis=0)


def all_gather(comm, x):
    """Given: every rank's 1-D array, concatenated in rank order; one message to each other rank."""
    for peer in range(comm.size):
        if peer != comm.rank:
            comm.send(x, peer)
    return np.concatenate([x if peer == comm.rank else comm.recv(peer) for peer in range(comm.size)])


def inspect_checkpoints(ckpt_dir, n):
    """Given (the grader and the public tests call it; leave it as it is): one row per step folder,
    [step, committed, world_size, verified, w (n values), m (n values)], NaN where unknown;
    a single row of -1 when ckpt_dir does not exist."""
    if not os.path.isdir(ckpt_dir):
        return np.full((1, 4 + 2 * n), -1.0)
    rows = []
    for name in sorted(os.listdir(ckpt_dir)):
        if not re.fullmatch(r"step-\d{8}", name):
            continue
        row = np.full(4 + 2 * n, np.nan)
        row[:2] = int(name[5:]), 0
        try:
            with open(os.path.join(ckpt_dir, name, MANIFEST)) as f:
                man = json.load(f)
            row[1:3] = 1, man["world_size"]
            row[3], parts = 0, []
            for q, sh in enumerate(man["shards"]):
                with open(os.path.join(ckpt_dir, name, sh["file"]), "rb") as f:
                    raw = f.read()
                if sh["file"] != shard_file(q) or hashlib.sha256(raw).hexdigest() != sh["sha256"]:
                    raise ValueError(sh["file"])
                parts.append(np.load(io.BytesIO(raw), allow_pickle=False).reshape(2, -1))
            state = np.concatenate(parts, axis=1)
            if state.shape == (2, n) and man["step"] == row[0] and man["n"] == n:
                row[3], row[4:] = 1, state.ravel()
        except (OSError, KeyError, TypeError, ValueError):
            pass
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(-1, 4 + 2 * n)


def file_bytes(path):
    """Given (the grader calls it): the bytes of a file as a uint8 array (empty if it does not exist)."""
    if not os.path.exists(path):
        return np.zeros(0, dtype=np.uint8)
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8).copy()


def damage(path, how):
    """Given (the grader calls it): 'flip' a bit of the file's last byte, 'truncate' it by 8 bytes, 'delete' it;
    [1.0] once done, [0.0] if there is no such file."""
    if not os.path.isfile(path):
        return np.zeros(1)
    if how == "delete":
        os.unlink(path)
        return np.ones(1)
    with open(path, "r+b") as f:
        raw = bytearray(f.read())
        if how == "flip":
            raw[-1] ^= 0x10
        else:
            raw = raw[:-8]
        f.seek(0)
        f.truncate()
        f.write(raw)
    return np.ones(1)


# %%
def atomic_write(path, data):
    """Write ``data`` (bytes or a uint8 array) to ``path``: a temporary file in the same folder, fsync, os.replace."""
    ### BEGIN SOLUTION
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".partial-", dir=folder)
    with contextlib.ExitStack() as undo:  # on any error: remove the temporary file, then re-raise
        undo.callback(lambda: os.path.exists(scratch) and os.unlink(scratch))
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(scratch, path)  # atomic within one file system: old content or new, never a mix
    ### END SOLUTION


# %%
def write_checkpoint(comm, ckpt_dir, step, state, n):
    """Every rank writes its shard; ranks > 0 send rank 0 their sha256; rank 0 commits the manifest."""
    ### BEGIN SOLUTION
    folder = step_dir(ckpt_dir, step)
    os.makedirs(folder, exist_ok=True)
    sink = io.BytesIO()
    np.save(sink, np.ascontiguousarray(state), allow_pickle=False)
    raw = sink.getvalue()
    atomic_write(os.path.join(folder, shard_file(comm.rank)), raw)
    digest = np.frombuffer(hashlib.sha256(raw).digest(), dtype=np.uint8)
    if comm.rank != 0:
        return comm.send(digest, 0)  # 32 bytes: the state itself never crosses the network
    digests = [digest] + [comm.recv(src) for src in range(1, comm.size)]  # waits for every shard
    entries = []
    for src, got in enumerate(digests):
        lo, hi = block(n, comm.size, src)
        entries.append({"file": shard_file(src), "lo": lo, "hi": hi, "sha256": bytes(got.astype(np.uint8)).hex()})
    manifest = {"step": int(step), "n": int(n), "world_size": comm.size, "dtype": state.dtype.name,
                "shards": entries}
    atomic_write(os.path.join(folder, MANIFEST), json.dumps(manifest).encode())  # the commit point, last
    ### END SOLUTION


# %%
def load_resharded(comm, ckpt_dir, n, dtype):
    """(step, this rank's (2, hi - lo) block) of the newest checkpoint every rank can verify, or (0, None)."""
    ### BEGIN SOLUTION
    dtype = np.dtype(dtype)
    lo, hi = block(n, comm.size, comm.rank)

    def manifest_in(folder):
        with contextlib.suppress(OSError, ValueError), open(os.path.join(folder, MANIFEST)) as fh:
            found = json.load(fh)
            return found if isinstance(found, dict) else {}
        return {}  # never committed, or a torn manifest

    names = os.listdir(ckpt_dir) if os.path.isdir(ckpt_dir) else []
    steps = sorted((int(name[5:]) for name in names if re.fullmatch(r"step-[0-9]{8}", name)), reverse=True)
    candidates = []
    for step in steps:
        manifest = manifest_in(step_dir(ckpt_dir, step))
        if manifest.get("step") == step and manifest.get("n") == n:
            candidates.append((step, step_dir(ckpt_dir, step), manifest))

    def my_block(folder, manifest):
        out, filled = np.empty((2, hi - lo), dtype=dtype), 0
        for entry in manifest["shards"]:
            a, z = max(lo, entry["lo"]), min(hi, entry["hi"])
            if a < z:  # read only the shards that hold some of my rows
                with open(os.path.join(folder, os.path.basename(entry["file"])), "rb") as fh:
                    raw = fh.read()
                if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
                    raise ValueError(f"{entry['file']} does not match its sha256")
                part = np.load(io.BytesIO(raw), allow_pickle=False)
                if part.dtype != dtype or part.shape != (2, entry["hi"] - entry["lo"]):
                    raise ValueError(f"{entry['file']} holds a {part.dtype} array of shape {part.shape}")
                out[:, a - lo:z - lo] = part[:, a - entry["lo"]:z - entry["lo"]]
                filled += z - a
        return out if filled == hi - lo else None

    blocks = [None] * len(candidates)
    for i, (_, folder, manifest) in enumerate(candidates):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            blocks[i] = my_block(folder, manifest)
    flags = np.array([got is not None for got in blocks], dtype=np.int8)
    every_rank = all_gather(comm, flags).reshape(comm.size, len(candidates))
    usable = [i for i in range(len(candidates)) if every_rank[:, i].all()]
    return (candidates[usable[0]][0], blocks[usable[0]]) if usable else (0, None)
    ### END SOLUTION


# %%
def train_sharded(comm, data, w0, steps, lr, ckpt_dir, every):
    """Momentum SGD with w and m sharded; a sharded checkpoint every ``every`` steps; resume on any K."""
    ### BEGIN SOLUTION
    A, b = data[:, :-1], data[:, -1]
    n = A.shape[1]
    lo, hi = block(n, comm.size, comm.rank)
    os.makedirs(ckpt_dir, mode=0o755, exist_ok=True)
    start, state = load_resharded(comm, ckpt_dir, n, w0.dtype)
    w, m = (w0.copy(), np.zeros_like(w0)) if state is None else (state[0].copy(), state[1].copy())
    for s in range(start, steps):
        g = gradient(A, b, all_gather(comm, w))[lo:hi]
        m = MU * m + g
        w = w - lr * m
        done = s + 1
        if done % every == 0:
            write_checkpoint(comm, ckpt_dir, done, np.stack([w, m]), n)
    return np.stack((w, m))
    ### END SOLUTION

# %% [markdown]
# Crash rank 1 in the middle of the run on K ranks, flip a bit of one shard of the newest checkpoint,
# restart on K_AFTER ranks, and compare with a run that never crashed: the restart must skip the damaged
# checkpoint and still end on the same bits.

# %% tags=["demo"]
rng = np.random.default_rng(18)
N_PARAMS = 7
A = rng.standard_normal((12, N_PARAMS))
DATA = np.column_stack([A, A @ rng.standard_normal(N_PARAMS)])
LR = 0.5 / np.linalg.eigvalsh(A.T @ A).max()
W0 = 0.1 * rng.standard_normal(N_PARAMS)


def job(ckpt_dir, k, faults=None):
    args = tuple((DATA, W0[slice(*block(N_PARAMS, k, r))], STEPS, LR, ckpt_dir, EVERY) for r in range(k))
    res = cluster.run(lambda comm, *a: train_sharded(comm, *a[comm.rank]), k, backend="sim", args=args,
                      faults=faults, timeout=60)
    return np.concatenate(res.values, axis=1)


try:
    crash_dir, clean_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    crash_at = (K - 1) * (1 + STEPS // 2)  # rank 1's sends: the flags, then K - 1 per step (+ digests)
    try:
        job(crash_dir, K, cluster.Faults(crash={1: crash_at}))
    except cluster.RankError as err:
        print("the first attempt failed:", err.summary.splitlines()[0][:100])
    table = inspect_checkpoints(crash_dir, N_PARAMS)
    print("step folders after the crash [step, committed, K, verified]:", table[:, :4].tolist())
    newest = int(max(row[0] for row in table if row[3] == 1))
    damage(os.path.join(step_dir(crash_dir, newest), shard_file(1)), "flip")
    resumed = job(crash_dir, K_AFTER)
    clean = job(clean_dir, K)
    assert np.array_equal(resumed, clean), "the restart on K_AFTER ranks differs from the uninterrupted run"
    print(f"damaged step {newest}, resumed on {K_AFTER} ranks: bit for bit equal to the uninterrupted run")
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
