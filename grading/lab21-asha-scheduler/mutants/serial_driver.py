# mutant: the driver hands out one job and waits for its result before the next: no parallel training
# loses: driver
import numpy as np


def asha_search(comm, curves, eta, min_resource, max_resource, time_per_unit):
    """Rank 0 schedules with ASHA, ranks 1..K-1 train; see the introduction for the protocol."""
    if comm.rank > 0:
        jobs = 0
        while True:
            msg = comm.recv(0)
            if msg[0] < 0:
                return np.array(jobs)
            trial, rung, r_from, r_to = int(msg[0]), int(msg[1]), msg[2], msg[3]
            comm.compute(time_per_unit * (r_to - r_from))
            comm.send(np.array([curves[trial, rung]]), 0)
            jobs += 1
    sched = ASHA(eta, min_resource, max_resource, len(curves))
    now, busy, idle = 0.0, {}, list(range(1, comm.size))
    while True:
        while idle and not busy:
            job = sched.next_job()
            if job is None:
                break
            w = idle.pop(0)
            trial, rung = job
            r_from = sched.rungs[rung - 1] if rung else 0.0
            comm.send(np.array([trial, rung, r_from, sched.rungs[rung]], dtype=np.float64), w)
            busy[w] = (now + time_per_unit * (sched.rungs[rung] - r_from), trial, rung)
        if not busy:
            break
        w = min(busy, key=lambda q: (busy[q][0], q))
        now, trial, rung = busy.pop(w)
        sched.on_result(trial, rung, float(comm.recv(w)[0]))
        idle = sorted(idle + [w])
    for w in range(1, comm.size):
        comm.send(np.array([-1.0]), w)
    trial, score = sched.best()
    return np.array([trial, score], dtype=np.float64)
