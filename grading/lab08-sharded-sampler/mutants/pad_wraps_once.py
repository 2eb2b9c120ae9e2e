# mutant: pads with order[:pad] once (np.concatenate): right while K <= 2n, too short when K > 2n, where the order
# must be repeated again and again (rank_epochs stacks whatever length comes back)
# loses: exactly_once, spec
# says: again and again
REPLACE = [("order = order[:total] if drop_last else np.resize(order, total)",
            "order = order[:total] if drop_last else np.concatenate([order, order[:total - n]])"),
           ("return np.array(rows, dtype=np.int64).reshape(len(rows), width)",
            "return np.array(rows, dtype=np.int64).reshape(len(rows), -1)")]
