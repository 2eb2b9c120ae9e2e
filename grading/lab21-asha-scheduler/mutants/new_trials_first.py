# mutant: next_job starts new trials before it promotes paused ones
# loses: jobs, driver, protocol
REPLACE = [("        for k in range(self.top - 1, -1, -1):", "        for k in (range(self.top - 1, -1, -1) if self.n_started == self.cap else ()):"),
           ("        return (fresh, 0) if fresh < self.cap else None", "        return (fresh, 0) if fresh < self.cap else self._promote()")]


def _promote(self):
    for k in range(self.top - 1, -1, -1):
        quota = len(self.results[k]) // self.eta
        waiting = [t for t in self.ranked(k)[:quota] if t not in self.moved_up[k]]
        if waiting:
            self.moved_up[k].add(waiting[0])
            return waiting[0], k + 1
    return None


PASHA._promote = _promote  # noqa: F821
