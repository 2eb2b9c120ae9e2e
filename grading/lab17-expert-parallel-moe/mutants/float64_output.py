# mutant: the output buffer is np.zeros(tokens.shape), float64 even when the tokens are float32
# loses: correct_sim
# says: dtype
REPLACE = [
    ('y = np.zeros_like(tokens)',
     'y = np.zeros(tokens.shape)'),
]
