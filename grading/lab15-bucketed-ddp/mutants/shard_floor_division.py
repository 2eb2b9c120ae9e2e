# mutant: shards cut as X[r*(B//K):(r+1)*(B//K)]: with uneven batches the shards are off by a row
# loses: train_sim, train_process, frozen
REPLACE = [
    ('mine = np.array_split(np.arange(len(X)), world)[me]',
     'mine = np.arange(me * (len(X) // world), (me + 1) * (len(X) // world))'),
]
