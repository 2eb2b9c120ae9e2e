# mutant: the majority counts only the acks and forgets that the leader holds the entry too
# loses: commit, minority, majority_lost
REPLACE = [
    ('committed[i] = 2 * (1 + acks) > comm.size',
     'committed[i] = 2 * acks > comm.size'),
]
