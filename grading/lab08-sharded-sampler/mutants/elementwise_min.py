# mutant: all-reduces [epoch, position] with an elementwise min: rows in two epochs give the older epoch with the
# newer epoch's position 0
# loses: agree
# says: reduced apart
def agree_progress(comm, n, saved):
    rows = np.asarray(saved, dtype=np.int64).reshape(-1, 4)  # noqa: F821
    big = np.iinfo(np.int64).max  # noqa: F821
    if len(rows):
        best = np.array([rows[:, 0].min(), (rows[:, 1] + rows[:, 2] * rows[:, 3]).min()], dtype=np.int64)  # noqa: F821
    else:
        best = np.array([big, big], dtype=np.int64)  # noqa: F821
    hop = 1
    while hop < comm.size:
        comm.send(best, (comm.rank + hop) % comm.size)
        best = np.minimum(best, comm.recv((comm.rank - hop) % comm.size))  # noqa: F821
        hop *= 2
    return np.zeros(2, dtype=np.int64) if best[0] == big else best  # noqa: F821
