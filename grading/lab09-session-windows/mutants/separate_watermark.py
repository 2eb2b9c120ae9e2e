# mutant: the events travel in one message and the watermark in a second one to every rank: the right
# answer for twice the messages
# loses: one_message
# says: the watermark travels in the frame
REPLACE = [("                comm.send(frames[d], d)", "                comm.send(frames[d][1:], d)\n"
            "                comm.send(frames[d][:1], d)"),
           ("        arrived = [frames[me]] + [comm.recv(src) for src in range(K) if src != me]",
            "        arrived = [frames[me]] + [np.concatenate([comm.recv(src)[::-1] for _ in range(2)])[::-1]\n"
            "                                  for src in range(K) if src != me]")]
