# mutant: ties at a rung go to the newer trial
# loses: decisions, jobs
# says: first wrong one
import numpy as np


class ASHA:
    """Asynchronous successive halving over trials 0..max_trials-1; a higher score is better."""

    def __init__(self, eta, min_resource, max_resource, max_trials):
        self.eta, self.max_trials = int(eta), int(max_trials)
        self.rungs = [float(min_resource)]
        while self.rungs[-1] * self.eta <= max_resource * (1 + 1e-12):
            self.rungs.append(self.rungs[-1] * self.eta)
        self.scores = [{} for _ in self.rungs]  # rung -> {trial: score}
        self.promoted = [set() for _ in self.rungs]
        self.started = 0

    def promotable(self, rung):
        """Trials in the top floor(n / eta) at ``rung`` not yet promoted from it, best first."""
        seen = self.scores[rung]
        order = sorted(seen, key=lambda t: (-seen[t], -t))
        return [t for t in order[:len(seen) // self.eta] if t not in self.promoted[rung]]

    def on_result(self, trial, rung, score):
        """Record a result; return "promote", "continue" or "stop"."""
        self.scores[rung][trial] = float(score)
        if rung == len(self.rungs) - 1:
            return "stop"
        return "promote" if trial in self.promotable(rung) else "continue"

    def next_job(self):
        """(trial, rung) to run now, or None."""
        for k in reversed(range(len(self.rungs) - 1)):
            ready = self.promotable(k)
            if ready:
                self.promoted[k].add(ready[0])
                return ready[0], k + 1
        if self.started < self.max_trials:
            self.started += 1
            return self.started - 1, 0
        return None

    def best(self):
        """(trial, score): the best score at the highest rung any trial reached; ties to the older trial."""
        top = max(k for k in range(len(self.rungs)) if self.scores[k])
        seen = self.scores[top]
        t = min(seen, key=lambda q: (-seen[q], q))
        return t, seen[t]

