# mutant: a frozen tensor is not updated but its gradient is still all-reduced every step
# loses: frozen
import numpy as np


def ddp_train(comm, X, Y, params, steps, lr, bucket_bytes, frozen=()):
    size, rank = comm.size, comm.rank
    x_mine, y_mine = np.array_split(X, size)[rank], np.array_split(Y, size)[rank]
    weight = len(x_mine) / len(X)
    p = {name: value.copy() for name, value in params.items()}
    for _ in range(int(steps)):
        if len(x_mine):
            out, cache = mlp_forward(p, x_mine)  # noqa: F821
            _, dy = mse_loss(out, y_mine)  # noqa: F821
            _, g = mlp_backward(p, cache, dy)  # noqa: F821
            local = {name: g[name] * weight for name in p}
        else:
            local = {name: np.zeros_like(p[name]) for name in p}
        total = bucketed_allreduce(comm, local, bucket_bytes)  # noqa: F821
        for name in p:
            if name not in frozen:
                p[name] -= lr * total[name]
    return p
