# mutant: wraps the chapter's ASHA from the course library through an import path a grep does not see
# loses: decisions, jobs, growth, driver, protocol
import importlib


class PASHA:
    def __init__(self, eta, min_resource, max_resource, max_trials, eps):
        lib = importlib.import_module("scaleoutai.parallel." + "h" + "po")
        self._impl = lib.ASHA({"x": (0.0, 1.0)}, eta, min_resource, max_resource, max_trials)
        self.top = len(self._impl.r) - 1
        self.resources = self._impl.r

    def next_job(self):
        job = self._impl.next_job()
        return None if job is None else (job.trial, job.rung)

    def on_result(self, trial, rung, score):
        return self._impl.on_result(trial, rung, score)

    def best(self):
        t, _, s = self._impl.best()
        return t, s
