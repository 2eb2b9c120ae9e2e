# mutant: rank 0 gathers every rank's progress and takes the min, but never sends the answer back: the other
# ranks resume from their own rows
# loses: agree
# says: different resume points
REPLACE = [("""    while hop < K:
        comm.send(best, (r + hop) % K)
        got = comm.recv((r - hop) % K)
        best = np.minimum(best, np.asarray(got, dtype=np.int64).reshape(1))
        hop *= 2""", """    if r == 0:
        for src in range(1, K):
            best = np.minimum(best, np.asarray(comm.recv(src), dtype=np.int64).reshape(1))
    else:
        comm.send(best, 0)""")]
