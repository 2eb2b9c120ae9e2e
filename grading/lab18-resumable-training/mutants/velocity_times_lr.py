# mutant: momentum written as v = MU v + lr g, w -= v: the same parameters, but the checkpoints' velocity is
# lr times the lab's (and a checkpoint in the lab's convention resumes wrongly)
# loses: intact, resume
# says: velocity in the checkpoint
REPLACE = [
    ('        v = MU * v + g\n        w = w - lr * v\n', '        v = MU * v + lr * g\n        w = w - v\n'),
]
