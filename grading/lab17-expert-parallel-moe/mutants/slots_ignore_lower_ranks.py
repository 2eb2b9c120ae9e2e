# mutant: a rank numbers its slots as if its tokens came first: the lower ranks' assignments to the same expert
# and choice are not counted before its own
# loses: correct_sim, drops, correct_process
# says: global token order
REPLACE = [
    ('taken = np.cumsum(per_choice, axis=0) - per_choice + everyone[:rank].sum(axis=0)',
     'taken = np.cumsum(per_choice, axis=0) - per_choice'),
]
