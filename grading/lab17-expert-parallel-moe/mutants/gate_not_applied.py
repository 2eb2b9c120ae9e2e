# mutant: the experts' outputs are added without the router's gate weights
# loses: correct_sim, drops, correct_process, traffic, own_code
REPLACE = [
    ('np.add.at(y, t, gate[t, c][:, None] * out)',
     'np.add.at(y, t, out)'),
]
