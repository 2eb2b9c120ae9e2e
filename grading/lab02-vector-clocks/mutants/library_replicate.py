# mutant: takes majority commit from the course library through an import path a grep does not see
# loses: commit, minority, majority_lost
import importlib

import numpy as np


def replicate(comm, entries):
    lib = importlib.import_module("scaleoutai." + "con" + "sensus")
    out = lib.replicate_log(comm, [0] * len(entries))
    return np.asarray(out.get("committed", []), dtype=bool)
