# mutant: each rank returns its own shard's loss and gradient: it never communicates
# loses: sharded, loss, stable, communication
def sharded_gradient(comm, X_shard, y_shard, w):
    return local_gradient(X_shard, y_shard, w)  # noqa: F821 - defined in the cells above
