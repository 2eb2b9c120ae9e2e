# mutant: slots handed out token by token (both choices of token 0, then token 1, ...), not all first choices
# before all second choices
# loses: correct_sim, drops, correct_process
# says: all first choices before second choices
REPLACE = [
    ('    for c in range(k):\n        seen = taken[c].copy()\n        for t in range(len(tokens)):\n'
     '            slot[t, c] = seen[choice[t, c]]\n            seen[choice[t, c]] += 1\n',
     '    seen = everyone[:rank].sum(axis=(0, 1))\n    for t in range(len(tokens)):\n        for c in range(k):\n'
     '            slot[t, c] = seen[choice[t, c]]\n            seen[choice[t, c]] += 1\n'),
]
