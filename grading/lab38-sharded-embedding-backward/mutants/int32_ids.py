# mutant: the requests travel as int32 (ids past 2**31 would wrap; the lab's format is int64)
# loses: requests
REPLACE = [("comm.send(need[j], j)", "comm.send(need[j].astype(np.int32), j)")]
