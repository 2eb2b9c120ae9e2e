# mutant: saves and loads with the course's sharded checkpoint (integrity.save_sharded) through an import path a grep does not see
# loses: train, resume, reshard, traffic, commit, checksum
import importlib


def write_checkpoint(comm, ckpt_dir, step, state, n):
    lib = importlib.import_module("scaleoutai.in" + "fra.integrity")
    lib.save_sharded(comm, step_dir(ckpt_dir, step), state, b"0123456789abcdef", {"step": step})  # noqa: F821
