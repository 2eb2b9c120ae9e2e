# mutant: promotes the best trial of a rung before floor(n/eta) results are in (max(1, n // eta))
# loses: decisions, jobs, driver
# says: first wrong one
REPLACE = [
    ('return [t for t in order[:len(seen) // self.eta] if t not in self.promoted[rung]]',
     'return [t for t in order[:max(1, len(seen) // self.eta)] if t not in self.promoted[rung]]'),
]
