# mutant: ZeRO-1 traffic: all-reduce the whole gradient, keep only the owned block
# loses: zero_bytes
# says: all-reducing the gradients costs more
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g_block = np.array_split(ring_allreduce(comm, grad_flat), comm.size)[comm.rank]  # noqa: F821
    state["t"] += 1
    lo = state["lo"]
    p_block = params_flat[lo:lo + g_block.size].copy()
    adam_update(p_block, g_block, state["m"], state["v"], state["t"], lr, betas, eps)  # noqa: F821
    return all_gather(comm, p_block)  # noqa: F821
