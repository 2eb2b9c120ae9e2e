# %% [markdown]
# # Lab 18: resume after a crash equals the uninterrupted run
#
# Chapter 18 asks one thing of fault-tolerant training: a job that crashes at step c and restarts from
# its newest checkpoint must end with the same parameters as a job that never crashed, while redoing
# at most `every` steps. Two details make or break it.
#
# **Atomic checkpoints.** A checkpoint written in place is torn if the writer dies half-way, and a
# torn newest checkpoint can be worse than none. Write to a temporary file *in the same folder*, then
# `os.replace(tmp, path)`: a rename within one file system is atomic, so `path` holds either the old
# checkpoint or the new one, never a mix. If the write fails, delete the temporary file and let the
# exception propagate.
#
# **Complete state.** Training here is data-parallel heavy-ball momentum on K ranks for the total
# squared error (1/2)||Xw - y||^2, whose gradient is the sum of the shards' gradients:
#
#     g_s = sum_r X_r^T (X_r w_s - y_r)      (one allreduce_sum per step)
#     v_{s+1} = MU v_s + g_s,   w_{s+1} = w_s - lr v_{s+1},   v_0 = 0, w_0 = params0
#
# so the state after step s is (s, w, v). Saving w without v, or resuming with the wrong step count,
# gives different final parameters.
#
# You write three functions:
#
# * `save_checkpoint(path, state)`: write the dict `state` (`step`, `params`, `velocity`; values may
#   be arrays, lists or numbers) as an `.npz` with `np.savez`, atomically, creating the folder if
#   needed. The temporary file must not be named like a checkpoint (`ckpt-<8 digits>.npz`).
# * `latest_checkpoint(ckpt_dir)`: `(step, state)` of the newest checkpoint that loads, or `None`.
#   Newest means the highest step in the file name, not the file written last.
# * `train_resumable(comm, data, params0, steps, lr, ckpt_dir, every)`: rank r holds `data`, its rows
#   `[x | y]` (shape (n_r, d+1), possibly 0 rows). Create `ckpt_dir`, resume from its latest
#   checkpoint if there is one, run the remaining steps, and after every step s+1 that is a multiple of
#   `every` let rank 0 save `{"step": s+1, "params": w, "velocity": v}` to
#   `checkpoint_path(ckpt_dir, s+1)`. Every rank returns the final w (the dtype of `params0`).
#
# The grader crashes one rank (`cluster.Faults(crash={r: n})`: rank r dies at its (n+1)-th send),
# looks at the checkpoint folder (every checkpoint must load and hold the right state), restarts the
# job with a new `cluster.run`, and compares the final w with its own uninterrupted run (tolerance
# 1e-9 + 1e-7|w| in float64, 1e-5 + 1e-4|w| in float32). It counts the steps you run by messages, so
# communicate only through `allreduce_sum`, exactly once per step. It tries K up to 8 (empty shards),
# every = 1 and every > steps (ckpt_dir must exist even without a checkpoint), and restarts on folders it
# prepared: one whose newest file named like a checkpoint does not load, one whose checkpoints were
# written out of step order. It also kills the writer of a save half-way (the process dies at a chosen
# byte of the file) and checks the old checkpoint survived.

# %% tags=["parameters"]
K = 4  # smoke: 3
STEPS = 40  # smoke: 12
EVERY = 5  # smoke: 4

# %%
import os
import tempfile

import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import ring_allreduce

MU = 0.9  # heavy-ball momentum


def allreduce_sum(comm, x):
    """Given: the element-wise sum over ranks; 2(K-1) messages per rank."""
    return ring_allreduce(comm, np.asarray(x))


def checkpoint_path(ckpt_dir, step):
    """Given: the checkpoint of step ``step`` is ckpt_dir/ckpt-<step, 8 digits>.npz."""
    return os.path.join(ckpt_dir, f"ckpt-{int(step):08d}.npz")


def load_checkpoint(path):
    """Given: a checkpoint as {"step": int, "params": array, "velocity": array}; ValueError if torn."""
    try:
        with np.load(path, allow_pickle=False) as z:
            fields = {k: z[k] for k in z.files}
    except Exception as exc:
        raise ValueError(f"{path} does not load ({type(exc).__name__}): a torn checkpoint?") from None
    missing = [k for k in ("step", "params", "velocity") if k not in fields]
    if missing:
        raise ValueError(f"{path} lacks {missing}: a torn or incomplete checkpoint")
    return {"step": int(fields["step"]), "params": fields["params"], "velocity": fields["velocity"]}


def inspect_checkpoints(ckpt_dir, d):
    """Given (the grader and the public tests call it; leave it as it is): one row per checkpoint file,
    [loads (1 or 0), step, params (d), velocity (d)] with NaN where a file does not load;
    a single row of -1 when the folder does not exist."""
    if not os.path.isdir(ckpt_dir):  # the grader reads this row as "no folder"
        return np.full((1, 2 + 2 * d), -1.0)
    rows = []
    for name in sorted(os.listdir(ckpt_dir)):
        row = np.full(2 + 2 * d, np.nan)
        row[0] = 0.0
        if name.startswith("ckpt-") and name.endswith(".npz"):
            try:
                ck = load_checkpoint(os.path.join(ckpt_dir, name))
                p, v = np.ravel(ck["params"]), np.ravel(ck["velocity"])
                if p.shape == v.shape == (d,):
                    row[:] = np.concatenate([[1.0, ck["step"]], p, v])
            except ValueError:
                pass
            rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(-1, 2 + 2 * d)


# %%
def save_checkpoint(path, state):
    """Write ``state`` to ``path`` as .npz atomically: temp file in the same folder, then os.replace."""
    ### BEGIN SOLUTION
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".writing-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    ### END SOLUTION


# %%
def latest_checkpoint(ckpt_dir):
    """(step, state) of the checkpoint with the highest step in ``ckpt_dir`` that loads, or None."""
    ### BEGIN SOLUTION
    if not os.path.isdir(ckpt_dir):
        return None
    steps = []
    for name in os.listdir(ckpt_dir):
        digits = name[len("ckpt-"):-len(".npz")]
        if name.startswith("ckpt-") and name.endswith(".npz") and len(digits) == 8 and digits.isdigit():
            steps.append(int(digits))
    for step in sorted(steps, reverse=True):
        try:
            return step, load_checkpoint(checkpoint_path(ckpt_dir, step))
        except ValueError:
            continue
    return None
    ### END SOLUTION


# %%
def train_resumable(comm, data, params0, steps, lr, ckpt_dir, every):
    """Momentum SGD on the summed gradient; rank 0 checkpoints every ``every`` steps; resume if possible."""
    ### BEGIN SOLUTION
    X, y = data[:, :-1], data[:, -1]  # rows are [x | y]
    os.makedirs(ckpt_dir, exist_ok=True)
    found = latest_checkpoint(ckpt_dir)
    if found is None:
        start, w, v = 0, params0.copy(), np.zeros_like(params0)
    else:
        start, state = found
        w = state["params"].astype(params0.dtype)
        v = state["velocity"].astype(params0.dtype)
    for s in range(start, steps):
        g = allreduce_sum(comm, X.T @ (X @ w - y))
        v = MU * v + g
        w = w - lr * v
        if (s + 1) % every == 0 and comm.rank == 0:
            save_checkpoint(checkpoint_path(ckpt_dir, s + 1), {"step": s + 1, "params": w, "velocity": v})
    return w
    ### END SOLUTION


# %% [markdown]
# Crash rank 1 in the middle of step 2·EVERY + 1, look at the checkpoints it left, restart, and
# compare with a run that never crashed.

# %%
rng = np.random.default_rng(18)
D = 4
X = rng.standard_normal((10 * K, D))
y = X @ rng.standard_normal(D)
LR = 0.5 / np.linalg.eigvalsh(X.T @ X).max()
shards = [np.column_stack([Xr, yr]) for Xr, yr in zip(np.array_split(X, K), np.array_split(y, K))]
w0 = np.zeros(D)


def job(ckpt_dir, faults=None):
    args = tuple((shards[r], w0, STEPS, LR, ckpt_dir, EVERY) for r in range(K))
    return cluster.run(lambda comm, *a: train_resumable(comm, *a[comm.rank]), K, backend="sim", args=args,
                       faults=faults, timeout=60)


try:
    crash_dir, clean_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    try:
        job(crash_dir, cluster.Faults(crash={1: 2 * (K - 1) * (2 * EVERY + 1)}))
    except cluster.RankError as err:
        print("the first attempt failed:", err.summary.splitlines()[0][:100])
    print("checkpoints after the crash (loads, step):", inspect_checkpoints(crash_dir, D)[:, :2].tolist())
    resumed = job(crash_dir).values[0]
    clean = job(clean_dir).values[0]
    print("largest difference, resumed vs never crashed:", float(np.abs(resumed - clean).max()))
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(save_checkpoint, latest_checkpoint, train_resumable, inspect_checkpoints)
