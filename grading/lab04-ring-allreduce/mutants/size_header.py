# mutant: sends each piece's length in a message of its own before the piece: twice the messages and the steps
# loses: bandwidth, latency, schedule
# says: recursive halving-doubling sends
import numpy as np

REPLACE = [
    ("comm.send(buf[edges[give[0]]:edges[give[1]]], peer)", "_send(comm, buf[edges[give[0]]:edges[give[1]]], peer)"),
    ("incoming = comm.recv(peer)", "incoming = _recv(comm, peer)"),
    ("comm.send(buf[edges[lo]:edges[hi]], peer)", "_send(comm, buf[edges[lo]:edges[hi]], peer)"),
    ("buf[edges[at]:edges[at + width]] = comm.recv(peer)", "buf[edges[at]:edges[at + width]] = _recv(comm, peer)"),
]


def _send(comm, piece, dst):
    comm.send(np.array([len(piece)], dtype=np.int64), dst)
    comm.send(piece, dst)


def _recv(comm, src):
    comm.recv(src)
    return comm.recv(src)
