# mutant: Adam with eps inside the square root, sqrt(v_hat + eps), not sqrt(v_hat) + eps (tiny gradients show it)
# loses: zero_sim, zero_process
# says: gradients of size 1e-07
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g = reduce_scatter(comm, grad_flat)  # noqa: F821
    state["t"] += 1
    t, (b1, b2), lo = state["t"], betas, state["lo"]
    state["m"] *= b1
    state["m"] += (1 - b1) * g
    state["v"] *= b2
    state["v"] += (1 - b2) * g * g
    p_block = params_flat[lo:lo + g.size].copy()
    p_block -= (lr * (state["m"] / (1 - b1 ** t)) / np.sqrt(state["v"] / (1 - b2 ** t) + eps)).astype(p_block.dtype)
    return all_gather(comm, p_block)  # noqa: F821
