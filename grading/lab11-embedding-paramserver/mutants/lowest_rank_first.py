# mutant: the server always listens to the lowest-ranked answered worker, ignoring the virtual times (with s = 0 a
# fast worker's next request, and its push, is taken before a slower worker's read of the same clock: not SGD)
# loses: bsp_exact, schedule
# says: virtual-time rule
REPLACE = [("k = min(ready, key=lambda q: (vt[q], q))", "k = min(ready)")]
