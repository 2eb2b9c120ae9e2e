# mutant: the rung ladder stops one rung short when eta^k * min hits max exactly (< instead of <=)
# loses: decisions, jobs, driver
REPLACE = [
    ('while self.rungs[-1] * self.eta <= max_resource * (1 + 1e-12):',
     'while self.rungs[-1] * self.eta < max_resource:'),
]
