# mutant: an answered worker's virtual time grows by its speed from its own last time, not from now: the time it
# waited for the bound is forgotten
# loses: schedule
# says: max(now, vt_k)
REPLACE = [("vt[q] = max(now, vt[q]) + speeds[q]", "vt[q] = vt[q] + speeds[q]")]
