# mutant: drops the last row of every shard (data[:-1]): the gradient misses K rows
# loses: train, resume, intact
REPLACE = [
    ('    X, y = data[:, :-1], data[:, -1]', '    X, y = data[:-1, :-1], data[:-1, -1]'),
]
