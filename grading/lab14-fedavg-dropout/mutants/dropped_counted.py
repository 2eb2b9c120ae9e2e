# mutant: a client that dropped this round is counted in the mean of delta_y as a zero delta
# loses: dropout, edge
# says: global model w
REPLACE = [("                alive.remove(q)        # gone for good: never sent to again, its c_q stays inside c\n",
            "                alive.remove(q)\n                reported += 1\n")]
