# mutant: always cuts the order to K*floor(n/K), even with drop_last=False: uneven n loses samples
# loses: exactly_once, spec, resume
# says: ceil(n/K)
REPLACE = [("per_rank = n // K if drop_last else -(-n // K)", "per_rank = n // K"),
           ("order = order[:total] if drop_last else np.resize(order, total)", "order = order[:total]"),
           ("width = n // comm.size if drop_last else -(-n // comm.size)", "width = n // comm.size")]
