# mutant: the combine writes with fancy indexing, so a token whose two experts live on the same rank keeps
# only one of its two weighted outputs (right, and graded for traffic, where no token has that)
# loses: correct_sim, ties, correct_process
REPLACE = [
    ('np.add.at(y, tok[sel], gate[sel, None] * back[j])',
     'y[tok[sel]] += gate[sel, None] * back[j]'),
]
