# mutant: the right sums returned as float64 whatever the input dtype
# loses: correct_sim
import numpy as np

_reference = ring_allreduce  # noqa: F821 - the reference defined in the cells above


def ring_allreduce(comm, x):
    return _reference(comm, x).astype(np.float64)
