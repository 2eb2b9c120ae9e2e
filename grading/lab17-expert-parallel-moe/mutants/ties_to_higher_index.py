# mutant: top-k by reversing an ascending argsort: router probabilities that tie go to the higher expert index
# loses: correct_sim, drops
# says: tie (lower index first)
REPLACE = [
    ('choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]',
     'choice = np.argsort(probs, axis=1, kind="stable")[:, ::-1][:, :k]'),
]
