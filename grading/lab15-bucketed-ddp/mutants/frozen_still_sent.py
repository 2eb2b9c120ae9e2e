# mutant: a frozen tensor is not updated but its gradient is still all-reduced every step
# loses: frozen
REPLACE = [
    ('local = {name: g[name] * weight for name in trainable}',
     'local = {name: g[name] * weight for name in p}'),
    ('local = {name: np.zeros_like(p[name]) for name in trainable}',
     'local = {name: np.zeros_like(p[name]) for name in p}'),
]
