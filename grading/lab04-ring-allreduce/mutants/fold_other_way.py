# mutant: folds the other way round: odd rank r < 2R hands its vector to r - 1, which plays virtual rank r // 2
# loses: schedule
# says: hands its vector to r + 1
REPLACE = [
    ("    return r // 2 if r % 2 else None", "    return None if r % 2 else r // 2"),
    ("    return 2 * v + 1 if v < R else v + R", "    return 2 * v if v < R else v + R"),
    ("        comm.send(buf, me + 1)\n        return comm.recv(me + 1)",
     "        comm.send(buf, me - 1)\n        return comm.recv(me - 1)"),
    ("        buf += comm.recv(me - 1)", "        buf += comm.recv(me + 1)"),
    ("        comm.send(buf, me - 1)  # unfold", "        comm.send(buf, me + 1)  # unfold"),
]
