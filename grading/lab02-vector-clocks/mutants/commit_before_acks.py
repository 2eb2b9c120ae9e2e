# mutant: the leader commits on the followers it believed alive before the acks came back, not on the acks
# loses: majority_lost
REPLACE = [
    ('            acks = 0\n', '            acks = 0\n            promised = len(alive)\n'),
    ('committed[i] = 2 * (1 + acks) > comm.size', 'committed[i] = 2 * (1 + promised) > comm.size'),
]
