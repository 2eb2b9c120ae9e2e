# mutant: a lost message is taken as "the peer sent nothing this round" (go on without it), as the course's
# other lossy protocols do: the agents miss their neighbours' values
# loses: solved_lossy, unsolvable, correct_process, channel, traffic_lossy
REPLACE = [("                parts, fin = {}, 0\n", "                parts, fin = {r: (0, np.zeros((0, 4), np.int64))}, 0\n")]
