# mutant: a receive merges the message's clock but does not increment the rank's own entry
# loses: clocks
REPLACE = [
    ('        V[comm.rank] += 1\n        if kind == 1:',
     '        if kind != 2:\n            V[comm.rank] += 1\n        if kind == 1:'),
]
