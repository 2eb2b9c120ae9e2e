# mutant: regular samples without weights (every entry counts 1, as PSRS on equal splits): a small rank's
#   sample counts as much as a large rank's
# loses: balance
# says: weighted regular sample
REPLACE = [("(elems[b - 1], b - a)", "(elems[b - 1], 1)")]
