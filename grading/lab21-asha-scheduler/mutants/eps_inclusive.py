# mutant: a swap by exactly eps already counts as a disagreement (>= instead of >)
# loses: decisions, jobs, growth, driver
REPLACE = [("if hi[a] - hi[b] > self.eps]", "if hi[a] - hi[b] >= self.eps]"),
           ("lo[b] - lo[a] > self.eps for", "lo[b] - lo[a] >= self.eps for")]
