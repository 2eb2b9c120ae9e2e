# mutant: resumes at start + 1: the sample at position start is never read
# loses: resume
# says: off by one
REPLACE = [("return order[rank::K][start:].copy()", "return order[rank::K][start + 1 if start else 0:].copy()")]
