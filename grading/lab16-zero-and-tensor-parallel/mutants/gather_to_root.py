# mutant: every rank sends its whole gradient to rank 0, which runs full Adam (m, v of all Psi values, hidden from the count) and sends the parameters back
# loses: zero_memory, zero_bytes
# says: never sent the updated parameters of the block it owns
import numpy as np

_root_moments = {}


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    state["t"] += 1
    if comm.rank != 0:
        comm.send(grad_flat, 0)
        return comm.recv(0)
    g = grad_flat.copy()
    for src in range(1, comm.size):
        g = g + comm.recv(src)
    m, v = _root_moments.setdefault(id(state), (np.zeros_like(params_flat), np.zeros_like(params_flat)))
    p = params_flat.copy()
    adam_update(p, g, m, v, state["t"], lr, betas, eps)  # noqa: F821
    for dst in range(1, comm.size):
        comm.send(p, dst)
    return p
