# mutant: plain data parallelism: all-reduce the full gradient, full Adam on every rank, report a 1/K state
# loses: zero_memory
# says: plain data parallelism
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g = ring_allreduce(comm, grad_flat)  # noqa: F821
    m, v = state.setdefault("_full", [np.zeros_like(params_flat), np.zeros_like(params_flat)])  # a list: uncounted
    state["t"] += 1
    p = params_flat.copy()
    adam_update(p, g, m, v, state["t"], lr, betas, eps)  # noqa: F821
    return p
