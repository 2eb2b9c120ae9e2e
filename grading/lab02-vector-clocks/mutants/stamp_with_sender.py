# mutant: each message carries the sender's rank after the timestamp (K + 1 entries); the receiver cuts it off again
# loses: timestamps
# says: vector of K
REPLACE = [("comm.send(delivered, (me + step) % size)", "comm.send(np.append(delivered, me), (me + step) % size)"),
           ("np.asarray(comm.recv(sender), dtype=np.int64).copy()", "np.asarray(comm.recv(sender), dtype=np.int64)[:size].copy()")]
