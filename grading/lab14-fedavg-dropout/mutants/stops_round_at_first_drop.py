# mutant: the server stops collecting a round at the first client that dropped (break, not continue): the clients
# after it are left out of that round, their reports are read one round late, and a client that dropped unnoticed
# is sent the next round's model
# loses: dropout, broadcast
REPLACE = [("                alive.remove(q)\n                continue\n",
            "                alive.remove(q)\n                break\n")]
