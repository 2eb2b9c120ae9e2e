# mutant: every pushed gradient is applied twice
# loses: bsp_exact, exactly_once, pulls_current, staleness, schedule, owners, sparse
# says: exactly once
REPLACE = [("rows[np.searchsorted(keys, push_keys)] -= lr * grads",
            "rows[np.searchsorted(keys, push_keys)] -= 2 * lr * grads")]
