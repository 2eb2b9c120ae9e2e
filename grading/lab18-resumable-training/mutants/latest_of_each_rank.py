# mutant: the ranks agree on the oldest of the checkpoints each rank would pick alone, not on one all of them can read
# loses: checksum
REPLACE = [
    ('    usable = [i for i in range(len(candidates)) if every_rank[:, i].all()]\n',
     '    firsts = [int(np.argmax(row)) if row.any() else len(candidates) for row in every_rank]\n    usable = [i for i in [max(firsts, default=0)] if i < len(candidates) and blocks[i] is not None]\n'),
]
