# mutant: the majority is counted among the ranks still alive (1 + acks > (1 + live followers) / 2), not among all K
# loses: majority_lost
# says: a majority needs more than
REPLACE = [
    ('committed[i] = 2 * (1 + acks) > comm.size', 'committed[i] = 2 * (1 + acks) > 1 + len(alive)'),
]
