# mutant: takes ZeRO from the course library through an import path a grep does not see
# loses: zero_sim, zero_process, zero_memory, zero_bytes, own_code
import importlib


def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    lib = importlib.import_module("scaleoutai.parallel." + "ze" + "ro")
    return lib.zero_step(comm, params_flat, grad_flat, state, lr)
