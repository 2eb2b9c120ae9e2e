# mutant: the load-balancing loss without the factor E (sum_i f_i p_i, 1/E under uniform routing)
# loses: aux_loss
# says: missing the factor E
REPLACE = [
    ('aux = float(n_experts * np.sum(',
     'aux = float(np.sum('),
]
