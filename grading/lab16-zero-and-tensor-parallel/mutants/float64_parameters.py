# mutant: updates and all-gathers the owned block in float64 whatever the input's dtype (float32 cases come back float64)
# loses: zero_sim
# says: keep the input's dtype
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g_block = reduce_scatter(comm, grad_flat).astype(np.float64)  # noqa: F821
    state["t"] += 1
    lo = state["lo"]
    p_block = params_flat[lo:lo + g_block.size].astype(np.float64)
    m, v = state["m"].astype(np.float64), state["v"].astype(np.float64)
    adam_update(p_block, g_block, m, v, state["t"], lr, betas, eps)  # noqa: F821
    state["m"][...], state["v"][...] = m, v
    return all_gather(comm, p_block)  # noqa: F821
