# mutant: one disagreement opens every rung at once (top jumps to s) instead of one rung more
# loses: decisions, jobs, growth, driver
REPLACE = [("            self.top += 1\n", "            self.top = self.last\n")]
