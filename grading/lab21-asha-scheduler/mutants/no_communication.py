# mutant: no rank talks to another: the driver reports trial 0 and every worker 0 jobs
# loses: driver
import numpy as np


def asha_search(comm, curves, eta, min_resource, max_resource, time_per_unit):
    if comm.rank > 0:
        return np.array(0)
    return np.array([0.0, 0.0])
