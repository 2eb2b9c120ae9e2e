# mutant: the resume restores the parameters but restarts the momentum from zero
# loses: resume
REPLACE = [
    ('        v = state["velocity"].astype(params0.dtype)',
     '        v = np.zeros_like(params0)'),
]
