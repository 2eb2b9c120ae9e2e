# mutant: the chapter's ASHA (hpo_halving.ASHA) and driver (hpo._schedule / hpo_run) adapted by hand to the
# lab's signatures: every rung is open from the start (top = s), eps is ignored, no ranking test
# loses: decisions, jobs, growth, driver
# says: the lab asks for PASHA
# score-at-most: 50
import bisect

import numpy as np


class PASHA:
    def __init__(self, eta, min_resource, max_resource, max_trials, eps):
        self.eta, self.max_trials = int(eta), int(max_trials)
        self.r = [float(min_resource)]
        while self.r[-1] * self.eta <= max_resource * (1 + 1e-12):
            self.r.append(self.r[-1] * self.eta)
        self.scores = [{} for _ in self.r]
        self.promoted = [set() for _ in self.r]
        self.n = 0
        self.top = len(self.r) - 1

    def promotable(self, k):
        top = sorted(self.scores[k], key=lambda t: (-self.scores[k][t], t))[:len(self.scores[k]) // self.eta]
        return [t for t in top if t not in self.promoted[k]]

    def next_job(self):
        for k in reversed(range(len(self.r) - 1)):
            cand = self.promotable(k)
            if cand:
                self.promoted[k].add(cand[0])
                return cand[0], k + 1
        if self.n < self.max_trials:
            self.n += 1
            return self.n - 1, 0
        return None

    def on_result(self, trial, rung, score):
        self.scores[rung][trial] = float(score)
        if rung == len(self.r) - 1:
            return "stop"
        return "promote" if trial in self.promotable(rung) else "continue"

    def best(self):
        k = max(i for i, s in enumerate(self.scores) if s)
        t = sorted(self.scores[k], key=lambda q: (-self.scores[k][q], q))[0]
        return t, self.scores[k][t]


def pasha_search(comm, curves, eta, min_resource, max_resource, eps, time_per_unit):
    sched = PASHA(eta, min_resource, max_resource, len(curves), eps)
    if comm.rank > 0:
        n = 0
        while True:
            msg = comm.recv(0)
            if msg[0] < 0:
                return np.array(n)
            comm.compute(time_per_unit * float(msg[2]))
            comm.send(np.array([curves[int(msg[0]), int(msg[1])]], dtype=np.float64), 0)
            n += 1
    now, busy, idle = 0.0, {}, list(range(1, comm.size))
    while True:
        while idle:
            job = sched.next_job()
            if job is None:
                break
            w = idle.pop(0)
            t, k = job
            units = sched.r[k] - (sched.r[k - 1] if k else 0.0)
            comm.send(np.array([t, k, units], dtype=np.float64), w)
            busy[w] = (now + time_per_unit * units, t, k)
        if not busy:
            break
        w = min(busy, key=lambda q: (busy[q][0], q))
        now, t, k = busy.pop(w)
        sched.on_result(t, k, float(comm.recv(w)[0]))
        bisect.insort(idle, w)
    for w in range(1, comm.size):
        comm.send(np.array([-1.0, -1.0, -1.0]), w)
    t, s = sched.best()
    return np.array([t, s, sched.top], dtype=np.float64)
