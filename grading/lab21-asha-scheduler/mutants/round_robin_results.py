# mutant: the driver collects results round-robin instead of in order of finish time
# loses: driver
REPLACE = [
    ('w = min(busy, key=lambda q: (busy[q][0], q))',
     'w = min(busy)'),
]
