# mutant: the right sums returned as float64 whatever the input dtype
# loses: correct_sim
# says: keep the input's dtype
import numpy as np

_reference = halving_doubling_allreduce  # noqa: F821 - the reference defined in the cells above


def halving_doubling_allreduce(comm, x):
    return _reference(comm, x).astype(np.float64)
