# mutant: the chapter's ZeRO stage 2 (parallel.zero.zero_init / zero_step), copied by hand: the full
# parameter vector in the state, Adam on a view of its block, a full-precision all-gather of the parameters
# loses: weights_sim, weights_process, memory, int8_wire, bytes
# says: the lab asks for the int8 weights
# score-at-most: 50
import numpy as np


def zero_init(comm, params_flat):
    vec = np.array(params_flat, copy=True)
    edges = np.cumsum([0] + [vec.size // comm.size + (j < vec.size % comm.size) for j in range(comm.size)])
    lo, hi = int(edges[comm.rank]), int(edges[comm.rank + 1])
    st = {"params": vec, "lo": lo, "hi": hi, "t": 0, "m": np.zeros(hi - lo, vec.dtype)}
    st["v"] = np.zeros_like(st["m"])
    st["master"] = st["params"][lo:hi]
    return st


def qwz_adam_step(comm, grad_flat, state, lr, qblock, betas=(0.9, 0.999), eps=1e-8):
    lo, hi = state["lo"], state["hi"]
    mine = reduce_scatter(comm, grad_flat)  # noqa: F821
    state["t"] += 1
    new = state["params"][lo:hi]
    adam_update(new, mine, state["m"], state["v"], state["t"], lr, betas, eps)  # noqa: F821 - in place, a view
    state["params"] = all_gather(comm, new)  # noqa: F821
    state["master"] = state["params"][lo:hi]
    return state["params"]
