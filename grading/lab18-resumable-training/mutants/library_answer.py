# mutant: saves with the course library's atomic checkpoint through an import path a grep does not see
# loses: train, resume, intact, atomic
import importlib


def save_checkpoint(path, state):
    lib = importlib.import_module("scaleoutai.parallel." + "elas" + "tic")
    lib.save_checkpoint(path, state)
