# mutant: a tie counts as a majority (1 + acks >= K/2): commits with exactly half of the ranks
# loses: majority_lost
REPLACE = [
    ('committed[i] = 2 * (1 + acks) > comm.size',
     'committed[i] = 2 * (1 + acks) >= comm.size'),
]
