# mutant: every rank sends its saved rows to rank 0, which finds the min and sends [epoch, consumed] back: the right
# answer, but the rows travel instead of one number
# loses: traffic
# says: not the rows
def agree_progress(comm, n, saved):
    rows = np.asarray(saved, dtype=np.int64).reshape(-1, 4)  # noqa: F821
    if comm.rank:
        comm.send(rows, 0)
        return comm.recv(0)
    allrows = np.concatenate([rows] + [comm.recv(src) for src in range(1, comm.size)])  # noqa: F821
    if len(allrows):
        g = int((allrows[:, 0] * n + allrows[:, 1] + allrows[:, 2] * allrows[:, 3]).min())
        out = np.array([g // n, g % n], dtype=np.int64)  # noqa: F821
    else:
        out = np.zeros(2, dtype=np.int64)  # noqa: F821
    for dst in range(1, comm.size):
        comm.send(out, dst)
    return out
