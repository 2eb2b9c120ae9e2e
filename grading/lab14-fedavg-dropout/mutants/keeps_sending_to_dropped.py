# mutant: a client whose recv raised is skipped this round but kept in the list: the server sends it the model in
# every later round (the right models, messages to nobody)
# loses: broadcast
# says: PeerCrashedError
REPLACE = [("                alive.remove(q)\n", "")]
