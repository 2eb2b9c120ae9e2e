# mutant: saves the parameters only: the restart loses the momentum
# loses: resume, intact
# says: do not load
import os
import tempfile

import numpy as np


def train_resumable(comm, data, params0, steps, lr, ckpt_dir, every):
    """Momentum SGD on the summed gradient; rank 0 checkpoints every ``every`` steps; resume if possible."""
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
            save_checkpoint(checkpoint_path(ckpt_dir, s + 1), {"step": s + 1, "params": w})
    return w
