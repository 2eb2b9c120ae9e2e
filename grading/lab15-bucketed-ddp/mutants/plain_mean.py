# mutant: averages the shard gradients with weight 1/K instead of n_r/B (wrong for uneven shards)
# loses: train_sim, train_process, messages, frozen, own_code
import numpy as np


def ddp_train(comm, X, Y, params, steps, lr, bucket_bytes, frozen=()):
    size, rank = comm.size, comm.rank
    x_mine, y_mine = np.array_split(X, size)[rank], np.array_split(Y, size)[rank]
    p = {name: value.copy() for name, value in params.items()}
    trainable = [name for name in p if name not in frozen]
    for _ in range(int(steps)):
        if len(x_mine):
            out, cache = mlp_forward(p, x_mine)  # noqa: F821
            _, dy = mse_loss(out, y_mine)  # noqa: F821
            _, g = mlp_backward(p, cache, dy)  # noqa: F821
            local = {name: g[name] / size for name in trainable}
        else:
            local = {name: np.zeros_like(p[name]) for name in trainable}
        total = bucketed_allreduce(comm, local, bucket_bytes)  # noqa: F821
        for name in trainable:
            p[name] -= lr * total[name]
    return p
