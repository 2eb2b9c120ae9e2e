# mutant: shards cut as X[r*(B//K):(r+1)*(B//K)]: with uneven batches the shards are off by a row
# loses: train_sim, train_process, frozen
REPLACE = [
    ('x_mine, y_mine = np.array_split(X, size)[rank], np.array_split(Y, size)[rank]',
     'n = len(X) // size\n    x_mine, y_mine = X[rank * n:(rank + 1) * n], Y[rank * n:(rank + 1) * n]'),
]
