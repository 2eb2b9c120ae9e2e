# mutant: off by one in the clock index: rank i increments entry (i + 1) % K instead of its own entry i
# loses: clocks
REPLACE = [
    ('        V[comm.rank] += 1\n        if kind == 1:',
     '        V[(comm.rank + 1) % comm.size] += 1\n        if kind == 1:'),
]
