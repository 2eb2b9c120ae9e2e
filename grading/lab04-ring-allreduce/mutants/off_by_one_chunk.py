# mutant: the all-gather starts one chunk late, so every rank ends with one stale chunk
# loses: correct_sim, correct_process, bandwidth, send_recv_only
REPLACE = [
    ('        comm.send(chunks[(r + 1 - s) % K], right)\n        chunks[(r - s) % K] = comm.recv(left)',
     '        comm.send(chunks[(r - s) % K], right)\n        chunks[(r - s - 1) % K] = comm.recv(left)'),
]
