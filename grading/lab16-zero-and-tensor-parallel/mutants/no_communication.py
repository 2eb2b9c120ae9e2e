# mutant: no communication: each rank runs Adam on its own local gradient only (the sum over ranks is never formed)
# loses: zero_sim, zero_process, zero_memory, zero_bytes, own_code
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    moments = state.setdefault("_full", [np.zeros_like(params_flat), np.zeros_like(params_flat)])
    state["t"] += 1
    p = params_flat.copy()
    adam_update(p, grad_flat, moments[0], moments[1], state["t"], lr, betas, eps)  # noqa: F821
    return p
