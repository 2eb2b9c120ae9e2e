# mutant: a promoted job trains from 0 to r_k again instead of continuing from r_{k-1} (durations tpu * r_k)
# loses: driver
# says: simulated seconds
REPLACE = [('            r_from = sched.rungs[rung - 1] if rung else 0.0\n', '            r_from = 0.0\n')]
