# mutant: worker 1 sends its whole table of curves to the driver, which then runs ASHA alone: right best trial, no parallel training
# loses: driver
import numpy as np


def asha_search(comm, curves, eta, min_resource, max_resource, time_per_unit):
    if comm.rank > 0:
        if comm.rank == 1:
            comm.send(np.asarray(curves, dtype=np.float64), 0)
        comm.recv(0)
        return np.array(0)
    table = comm.recv(1)
    sched = ASHA(eta, min_resource, max_resource, len(table))  # noqa: F821
    while (job := sched.next_job()) is not None:
        trial, rung = job
        sched.on_result(trial, rung, float(table[trial, rung]))
    for w in range(1, comm.size):
        comm.send(np.array([-1.0]), w)
    trial, score = sched.best()
    return np.array([trial, score], dtype=np.float64)
