# mutant: capacity counted from this rank's tokens only, not the global batch
# loses: correct_sim, drops, correct_process
REPLACE = [
    ('cap = capacity(int(per_choice[0].sum()), n_experts, k, capacity_factor)',
     'cap = capacity(len(tokens), n_experts, k, capacity_factor)'),
]
