# mutant: trains in float64 whatever the input's dtype: float32 parameters come back as float64
# loses: train, resume
# says: dtype
REPLACE = [
    ('        start, w, v = 0, params0.copy(), np.zeros_like(params0)',
     '        start, w, v = 0, params0.astype(np.float64), np.zeros(len(params0))'),
    ('        w = state["params"].astype(params0.dtype)\n        v = state["velocity"].astype(params0.dtype)',
     '        w = state["params"].astype(np.float64)\n        v = state["velocity"].astype(np.float64)'),
]
