# mutant: the owner answers every request with its whole shard and the requester picks its rows: the rows it did
# not ask for cross the network too
# loses: replies
REPLACE = [("comm.send(np.ascontiguousarray(my_rows[loc[j]]), j)", "comm.send(my_rows, j)"),
           ("rows_u[pos[j]] = comm.recv(j)",
            "rows_u[pos[j]] = comm.recv(j)[np.searchsorted(np.flatnonzero(owner == j), need[j])]")]
