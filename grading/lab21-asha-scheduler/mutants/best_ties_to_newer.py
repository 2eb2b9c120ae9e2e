# mutant: best() breaks ties between equal top-rung scores toward the newer trial
# loses: driver
REPLACE = [('        t = min(seen, key=lambda q: (-seen[q], q))\n', '        t = min(seen, key=lambda q: (-seen[q], -q))\n')]
