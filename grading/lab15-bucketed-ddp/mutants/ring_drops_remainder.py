# mutant: the leaders' ring cuts n // N values per chunk: the last n mod N values are never summed (and
# every chunk is empty when N > n)
# loses: allreduce, train_sim, train_process, frozen
# says: sum
REPLACE = [
    ('    parts = [piece.copy() for piece in np.array_split(vec, n_lead)]\n',
     '    width = len(vec) // n_lead\n    parts = [vec[i * width:(i + 1) * width].copy() for i in range(n_lead)]\n'),
    ('    return np.concatenate(parts)\n    ### END SOLUTION',
     '    return np.concatenate(parts + [vec[n_lead * width:]])\n    ### END SOLUTION'),
]
