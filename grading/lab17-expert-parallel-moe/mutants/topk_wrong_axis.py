# mutant: the router's top-k is taken over tokens (axis 0) instead of over experts (axis 1)
# loses: correct_sim, drops, correct_process, traffic, own_code
REPLACE = [
    ('choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]',
     'choice = np.argsort(-probs, axis=0, kind="stable")[:k].T'),
]
