# mutant: commits on a majority of the followers (acks > (K-1)/2): the leader alone (K = 1) never commits
# loses: commit, minority, majority_lost
REPLACE = [
    ('committed[i] = 2 * (1 + acks) > comm.size', 'committed[i] = 2 * acks > comm.size - 1'),
]
