# mutant: any swap between the two top rungs grows the top, however small (eps is ignored)
# loses: decisions, jobs, growth, driver
# says: more than eps
REPLACE = [("if hi[a] - hi[b] > self.eps]", "if hi[a] - hi[b] > 0]"),
           ("lo[b] - lo[a] > self.eps for", "lo[b] - lo[a] > 0 for")]
