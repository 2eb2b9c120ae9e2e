# mutant: the right top-k experts, but listed by expert id, not by probability: a token's first choice is its
# lowest expert id, so slots are handed out in the wrong priority
# loses: correct_sim, drops, correct_process
# says: slot order
REPLACE = [
    ('choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]',
     'choice = np.sort(np.argsort(-probs, axis=1, kind="stable")[:, :k], axis=1)'),
]
