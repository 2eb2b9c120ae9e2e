# mutant: right timestamps, but every message is delivered the moment it arrives: no hold-back queue
# loses: causal
# says: depends on
REPLACE = [("                if deliverable(stamp, delivered, j):\n", "                if True:\n")]
