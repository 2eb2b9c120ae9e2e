# mutant: the leaders' ring averages over the N nodes instead of summing (the gradient shrinks by N)
# loses: allreduce, train_sim, train_process, frozen, cross_node
REPLACE = [
    ('    return np.concatenate(parts)\n    ### END SOLUTION',
     '    return np.concatenate(parts) / n_lead\n    ### END SOLUTION'),
]
