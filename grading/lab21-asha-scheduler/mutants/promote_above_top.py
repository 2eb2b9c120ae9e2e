# mutant: next_job also promotes from the top rung itself, one rung past the current top
# loses: jobs, driver
REPLACE = [("        for k in range(self.top - 1, -1, -1):", "        for k in range(min(self.top, self.last - 1), -1, -1):")]
