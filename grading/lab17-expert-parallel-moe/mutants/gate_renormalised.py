# mutant: the gates are renormalised over the chosen top-k (Mixtral style) instead of g = P[t, e]
# loses: correct_sim, drops, correct_process
REPLACE = [
    ('gate = np.take_along_axis(probs, choice, axis=1)',
     'gate = np.take_along_axis(probs, choice, axis=1)\n    gate = gate / gate.sum(axis=1, keepdims=True)'),
]
