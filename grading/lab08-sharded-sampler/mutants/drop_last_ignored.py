# mutant: pads whatever drop_last says: with drop_last=True some samples are read twice
# loses: exactly_once, spec, resume
# says: floor(n/K)
REPLACE = [("per_rank = n // K if drop_last else -(-n // K)", "per_rank = -(-n // K)"),
           ("order = order[:total] if drop_last else np.resize(order, total)", "order = np.resize(order, total)"),
           ("width = n // comm.size if drop_last else -(-n // comm.size)", "width = -(-n // comm.size)")]
