# mutant: every rank trains on the whole batch it was handed and skips the all-reduce
# loses: train_sim, train_process, frozen
def ddp_train(comm, X, Y, params, steps, lr, G, bucket_bytes, frozen=()):
    p = {name: value.copy() for name, value in params.items()}
    for _ in range(int(steps)):
        out, cache = mlp_forward(p, X)  # noqa: F821
        _, dy = mse_loss(out, Y)  # noqa: F821
        _, g = mlp_backward(p, cache, dy)  # noqa: F821
        for name in p:
            if name not in frozen:
                p[name] -= lr * g[name]
    return p
