# mutant: the link is built with loss 0, so nothing is ever lost: right answers on a channel the grader did not give
# loses: channel
# says: LossyLink draws
REPLACE = [("    link = LossyLink(comm, loss, seed)\n    n, me", "    link = LossyLink(comm, 0.0, seed)\n    n, me")]
