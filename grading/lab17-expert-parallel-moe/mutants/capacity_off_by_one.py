# mutant: off by one at the capacity: an expert keeps C + 1 assignments (slot <= cap)
# loses: correct_sim, drops, correct_process
REPLACE = [
    ('kept = slot < cap',
     'kept = slot <= cap'),
]
