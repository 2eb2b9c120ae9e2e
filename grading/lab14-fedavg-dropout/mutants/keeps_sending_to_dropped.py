# mutant: a client whose recv raised is skipped this round but kept in the list: the server sends it (w, c) in
# every later round (the right values, messages to nobody)
# loses: broadcast
# says: PeerCrashedError
REPLACE = [("                alive.remove(q)        # gone for good: never sent to again, its c_q stays inside c\n", "")]
