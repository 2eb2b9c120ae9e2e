# mutant: equal virtual times go to the higher worker instead of the lower k
# loses: schedule
# says: ties to the lower k
REPLACE = [("k = min(ready, key=lambda q: (vt[q], q))", "k = min(ready, key=lambda q: (vt[q], -q))")]
