# mutant: the ack counter is never reset between entries, so later entries count earlier entries' acks
# loses: majority_lost
REPLACE = [
    ('            acks = 0\n', ''),
    ('        committed = np.zeros(len(entries), dtype=bool)\n',
     '        committed = np.zeros(len(entries), dtype=bool)\n        acks = 0\n'),
]
