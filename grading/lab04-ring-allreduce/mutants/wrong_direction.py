# mutant: a correct ring that runs the other way round: every message goes to the left neighbour (r-1) mod K
# loses: send_recv_only
# says: right neighbour
REPLACE = [
    ("        comm.send(chunks[(r - s) % K], right)\n        i = (r - s - 1) % K\n"
     "        chunks[i] = chunks[i] + comm.recv(left)",
     "        comm.send(chunks[(r + s) % K], left)\n        i = (r + s + 1) % K\n"
     "        chunks[i] = chunks[i] + comm.recv(right)"),
    ("        comm.send(chunks[(r + 1 - s) % K], right)\n        chunks[(r - s) % K] = comm.recv(left)",
     "        comm.send(chunks[(r - 1 + s) % K], left)\n        chunks[(r + s) % K] = comm.recv(right)"),
]
