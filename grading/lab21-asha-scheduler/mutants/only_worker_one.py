# mutant: the driver only ever uses worker 1
# loses: driver
REPLACE = [
    ('idle = sorted(idle + [w])',
     'idle = sorted(set(idle + [w]) & {1})'),
]
