# mutant: a send carries the clock from before this event's increment
# loses: clocks
REPLACE = [
    ('        V[comm.rank] += 1\n        if kind == 1:\n            comm.send(V.copy(), int(peer))',
     '        if kind == 1:\n            comm.send(V.copy(), int(peer))\n        V[comm.rank] += 1'),
]
