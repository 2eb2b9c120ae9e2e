# mutant: the driver receives results in the order it handed the jobs out (first in, first out), not by finish time
# loses: driver
REPLACE = [('w = min(busy, key=lambda q: (busy[q][0], q))', 'w = next(iter(busy))')]
