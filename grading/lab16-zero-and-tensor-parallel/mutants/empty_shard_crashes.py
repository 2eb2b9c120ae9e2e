# mutant: zero_init reads the first index of its block even when the block is empty (K > Psi): IndexError
# loses: master_sim, weights_sim, memory, int8_wire, bytes, own_code
# says: more ranks than parameters
import numpy as np


def zero_init(comm, params_flat):
    owned = np.array_split(np.arange(params_flat.size), comm.size)[comm.rank]
    lo = int(owned[0])
    master = params_flat[lo:lo + owned.size].copy()
    return {"master": master, "m": np.zeros_like(master), "v": np.zeros_like(master), "t": 0, "lo": lo}
