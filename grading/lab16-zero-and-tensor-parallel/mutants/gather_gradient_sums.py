# mutant: all-gathers the reduced gradient blocks and runs full Adam everywhere: right numbers, wrong wire
# loses: zero_memory
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g = all_gather(comm, reduce_scatter(comm, grad_flat))  # noqa: F821 - every rank now has the whole sum
    moments = state.setdefault("_full", [np.zeros_like(params_flat), np.zeros_like(params_flat)])  # a list: uncounted
    state["t"] += 1
    p = params_flat.copy()
    adam_update(p, g, moments[0], moments[1], state["t"], lr, betas, eps)  # noqa: F821
    return p
