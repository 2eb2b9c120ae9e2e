# mutant: Adam's bias correction uses step t + 1
# loses: zero_sim, zero_process, zero_memory, zero_bytes, own_code
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g_block = reduce_scatter(comm, grad_flat)  # noqa: F821
    state["t"] += 1
    lo = state["lo"]
    p_block = params_flat[lo:lo + g_block.size].copy()
    adam_update(p_block, g_block, state["m"], state["v"], state["t"] + 1, lr, betas, eps)  # noqa: F821
    return all_gather(comm, p_block)  # noqa: F821
