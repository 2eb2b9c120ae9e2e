# mutant: capacity rounded down, int(C_f * k * T / E), instead of up
# loses: correct_sim, drops, correct_process
# says: the capacity C
REPLACE = [
    ('cap = capacity(int(per_choice[0].sum()), n_experts, k, capacity_factor)',
     'cap = int(capacity_factor * k * int(per_choice[0].sum()) / n_experts)'),
]
