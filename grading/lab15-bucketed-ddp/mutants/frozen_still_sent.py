# mutant: a frozen tensor is not updated but its gradient is still all-reduced every step
# loses: frozen
# says: leave the frozen tensors out
REPLACE = [
    ('local = {name: np.zeros_like(weights[name]) for name in learn}',
     'local = {name: np.zeros_like(weights[name]) for name in weights}'),
    ('local = {name: grad[name] * share for name in learn}',
     'local = {name: grad[name] * share for name in weights}'),
]
