# mutant: saves the parameters only: the restart loses the momentum
# loses: resume, intact
# says: do not load
REPLACE = [
    ('{"step": s + 1, "params": w, "velocity": v}',
     '{"step": s + 1, "params": w}'),
]
