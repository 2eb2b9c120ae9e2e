# mutant: when two jobs end at the same simulated time the driver receives from the higher rank first
# loses: driver
REPLACE = [('w = min(busy, key=lambda q: (busy[q][0], q))', 'w = min(busy, key=lambda q: (busy[q][0], -q))')]
