# mutant: sends each chunk's length in a message of its own before the chunk: 4(K-1) messages per rank
# loses: bandwidth, send_recv_only
# says: 2(K-1)
import numpy as np

REPLACE = [
    ("comm.send(chunks[(r - s) % K], right)", "_send(comm, chunks[(r - s) % K], right)"),
    ("chunks[i] = chunks[i] + comm.recv(left)", "chunks[i] = chunks[i] + _recv(comm, left)"),
    ("comm.send(chunks[(r + 1 - s) % K], right)", "_send(comm, chunks[(r + 1 - s) % K], right)"),
    ("chunks[(r - s) % K] = comm.recv(left)", "chunks[(r - s) % K] = _recv(comm, left)"),
]


def _send(comm, chunk, dst):
    comm.send(np.array([len(chunk)], dtype=np.int64), dst)
    comm.send(chunk, dst)


def _recv(comm, src):
    comm.recv(src)
    return comm.recv(src)
