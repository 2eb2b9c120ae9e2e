# mutant: a promoted trial trains from zero to r_k (the job sends r_k, not r_k - r_(k-1)): right winner, longer makespan
# loses: driver, protocol
REPLACE = [("            units = sched.resources[rung] - (sched.resources[rung - 1] if rung > 0 else 0.0)",
            "            units = sched.resources[rung]")]
