# mutant: the doubling sends the whole vector every step (the partner copies out the blocks it lacks): right sums,
# too many bytes
# loses: bandwidth, schedule
# says: halving sends 1/2, 1/4
REPLACE = [
    ("        comm.send(buf[edges[lo]:edges[hi]], peer)\n        lo, hi =", "        comm.send(buf, peer)\n        lo, hi ="),
    ("        buf[edges[at]:edges[at + width]] = comm.recv(peer)",
     "        buf[edges[at]:edges[at + width]] = comm.recv(peer)[edges[at]:edges[at + width]]"),
]
