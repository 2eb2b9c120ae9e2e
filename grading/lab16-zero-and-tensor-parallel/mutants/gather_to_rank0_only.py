# mutant: the updated blocks are gathered to rank 0 only; the other ranks return their own block updated and the rest stale
# loses: zero_sim, zero_process, zero_memory, zero_bytes, own_code
# says: rank 1's parameters
import numpy as np


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    g_block = reduce_scatter(comm, grad_flat)  # noqa: F821
    state["t"] += 1
    lo = state["lo"]
    p_block = params_flat[lo:lo + g_block.size].copy()
    adam_update(p_block, g_block, state["m"], state["v"], state["t"], lr, betas, eps)  # noqa: F821
    if comm.rank == 0:
        return np.concatenate([p_block] + [comm.recv(src) for src in range(1, comm.size)])
    comm.send(p_block, 0)
    out = params_flat.copy()
    out[lo:lo + p_block.size] = p_block
    return out
