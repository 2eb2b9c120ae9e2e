# mutant: the top-k is taken over tokens instead of experts (argsort on the wrong axis)
# loses: correct_sim, drops, correct_process, traffic, own_code
REPLACE = [
    ('choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]',
     'choice = np.argsort(-probs, axis=0, kind="stable")[:k].T[:len(tokens)] % n_experts if len(tokens) >= k else np.argsort(-probs, axis=1, kind="stable")[:, :k]'),
]
