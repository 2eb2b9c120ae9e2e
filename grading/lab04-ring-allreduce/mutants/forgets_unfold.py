# mutant: the fold without the unfold: an even rank r < 2R returns its own vector and r + 1 never sends the sum back
# loses: correct_sim
REPLACE = [
    ("        comm.send(buf, me + 1)\n        return comm.recv(me + 1)",
     "        comm.send(buf, me + 1)\n        return buf"),
    ("    if folded:\n        comm.send(buf, me - 1)  # unfold\n", ""),
]
