# mutant: pads with the order's last entries (its reversed tail) instead of repeating it from its start:
# every sample still read once or twice, but not the lab's padding
# loses: spec, resume
# says: from its start
REPLACE = [("order = order[:total] if drop_last else np.resize(order, total)",
            "order = order[:total] if drop_last else np.concatenate([order, np.resize(order[::-1], total - n)])")]
