# mutant: every rank trains, but only rank 0 returns its parameters; the others hand back the ones they got
# loses: train_sim, train_process, frozen, own_code
# says: rank 1's
REPLACE = [
    ('            p[name] -= lr * total[name]\n    return p\n',
     '            p[name] -= lr * total[name]\n    return p if comm.rank == 0 else params\n'),
]
