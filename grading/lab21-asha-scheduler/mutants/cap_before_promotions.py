# mutant: next_job returns None once max_trials trials exist, before looking for promotions
# loses: jobs, driver
REPLACE = [('        for k in reversed(range(len(self.rungs) - 1)):\n            ready = self.promotable(k)',
            '        if self.started >= self.max_trials:\n            return None\n'
            '        for k in reversed(range(len(self.rungs) - 1)):\n            ready = self.promotable(k)')]
