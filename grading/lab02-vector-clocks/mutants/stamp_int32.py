# mutant: the timestamp goes on the wire as int32 (to halve the bytes); the receiver widens it again
# loses: timestamps
# says: int64
REPLACE = [("comm.send(delivered, (me + step) % size)", "comm.send(delivered.astype(np.int32), (me + step) % size)")]
