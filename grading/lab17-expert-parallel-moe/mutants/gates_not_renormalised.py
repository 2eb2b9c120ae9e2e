# mutant: the gates are the router probabilities P[t, e] of the two experts (the course's convention), not
# renormalised over the two
# loses: correct_sim, ties, correct_process, traffic, own_code
# says: divide by P[t, e1] + P[t, e2]
REPLACE = [
    ('gates = chosen / chosen.sum(axis=1, keepdims=True)',
     'gates = chosen'),
]
