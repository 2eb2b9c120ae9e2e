# mutant: chunks of n // K entries with the whole remainder on the last chunk (not np.array_split): right sums,
# but one message carries more than one of the lab's chunks
# loses: send_recv_only
# says: one of the K chunks
REPLACE = [
    ('    chunks = [c.copy() for c in np.array_split(x, K)]\n',
     '    step = len(x) // K\n'
     '    chunks = [x[i * step:(i + 1) * step].copy() for i in range(K - 1)] + [x[(K - 1) * step:].copy()]\n'),
]
