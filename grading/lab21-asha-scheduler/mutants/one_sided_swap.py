# mutant: only the gap at the top rung is held against eps; any reversal at rung top-1 counts
# loses: decisions, jobs, growth, driver
REPLACE = [("lo[b] - lo[a] > self.eps for", "lo[b] - lo[a] > 0 for")]
