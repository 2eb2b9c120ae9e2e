# mutant: an empty shard (K > B) runs forward and backward anyway: the mean of no rows divides by zero (the
# crash costs every test of those cases)
# loses: train_sim, messages, own_code
# says: K > B
REPLACE = [
    ('        if len(x_mine):\n            out, cache', '        if True:\n            out, cache'),
]
