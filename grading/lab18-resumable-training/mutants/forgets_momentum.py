# mutant: a restart restores w but restarts the momentum from zero
# loses: resume, reshard, checksum
REPLACE = [
    ('(state[0].copy(), state[1].copy())',
     '(state[0].copy(), np.zeros_like(w0))'),
]
