# mutant: the outputs come back in expert order and are written to the rank's tokens in that order, not to
# the tokens they belong to
# loses: correct_sim, ties, correct_process, traffic, own_code
# says: outputs in the token's order
REPLACE = [
    ('np.add.at(y, tok[sel], gate[sel, None] * back[j])',
     'np.add.at(y, np.sort(tok[sel]), gate[sel, None] * back[j])'),
]
