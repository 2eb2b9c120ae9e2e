# mutant: the clock counters are int8 (to save bytes on the wire): they overflow after 127 events of a long run
# loses: clocks
# says: overflow
REPLACE = [
    ('    V = np.zeros(comm.size, dtype=np.int64)\n', '    V = np.zeros(comm.size, dtype=np.int8)\n'),
]
