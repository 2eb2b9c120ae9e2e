# mutant: a rank that reads no partition reports -inf, as if it had a partition that has not started:
# with K > P the watermark never moves and no session is ever emitted
# loses: sessions, late, edge_cases, interleavings, frames
# says: a rank that reads no partition
REPLACE = [("for p in owned), default=np.inf)", "for p in owned), default=-np.inf)")]
