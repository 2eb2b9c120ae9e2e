# mutant: the owner's replies are cast to float64 (the requester casts them back): right values, twice the bytes
# of a float32 row
# loses: replies
REPLACE = [("comm.send(np.ascontiguousarray(my_rows[loc[j]]), j)", "comm.send(my_rows[loc[j]].astype(np.float64), j)")]
