# mutant: top-2 by reversing an ascending argsort: probabilities that tie go to the larger expert id
# loses: ties
# says: smaller expert id
REPLACE = [
    ('top2 = np.argsort(-probs, axis=1, kind="stable")[:, :2]',
     'top2 = np.argsort(probs, axis=1, kind="stable")[:, ::-1][:, :2]'),
]
