# mutant: keeps the full exact parameter vector in the state next to its shard (as plain data parallelism does)
# loses: memory
# says: 3*ceil(Psi/K)
REPLACE = [('return {"master": master, "m": np.zeros_like(master), "v": np.zeros_like(master), "t": 0, "lo": lo}',
            'return {"master": master, "m": np.zeros_like(master), "v": np.zeros_like(master), "t": 0, "lo": lo, '
            '"full": np.array(params_flat, copy=True)}')]
