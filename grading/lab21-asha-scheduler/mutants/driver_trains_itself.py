# mutant: the driver reads the scores from its own copy of the curves instead of asking the workers
# loses: driver, protocol
import numpy as np


def pasha_search(comm, curves, eta, min_resource, max_resource, eps, time_per_unit):
    if comm.rank > 0:
        comm.recv(0)
        return np.array(0)
    sched = PASHA(eta, min_resource, max_resource, len(curves), eps)  # noqa: F821
    while (job := sched.next_job()) is not None:
        trial, rung = job
        sched.on_result(trial, rung, float(curves[trial, rung]))
    for w in range(1, comm.size):
        comm.send(np.array([-1.0, -1.0, -1.0]), w)
    trial, score = sched.best()
    return np.array([trial, score, sched.top], dtype=np.float64)
