# mutant: the load-balancing loss of this rank's own tokens, not of the global batch
# loses: aux_loss
# says: ALL ranks
REPLACE = [
    ('totals = np.sum(summaries, axis=0)  # rank order on every rank: the same loss everywhere',
     'totals = summary'),
]
