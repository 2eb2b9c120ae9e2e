# mutant: nothing is ever dropped: the capacity test compares with slot >= 0
# loses: correct_sim, drops, correct_process
# says: full output
REPLACE = [
    ('kept = slot < cap',
     'kept = slot >= 0'),
]
