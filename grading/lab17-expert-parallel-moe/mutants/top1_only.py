# mutant: top-1 routing: each token goes to its most probable expert only (gate 1 after renormalising)
# loses: correct_sim, ties, correct_process, aux_loss, traffic, own_code
# says: first expert only
REPLACE = [
    ('top2 = np.argsort(-probs, axis=1, kind="stable")[:, :2]',
     'top2 = np.argsort(-probs, axis=1, kind="stable")[:, :1]'),
]
