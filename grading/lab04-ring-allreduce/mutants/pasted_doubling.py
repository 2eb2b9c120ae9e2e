# mutant: the course's recursive-doubling all-reduce (collectives.recursive_doubling_allreduce, with its fold)
# adapted by hand: right sums in log2 P + 2 steps, but every step sends the whole vector
# loses: bandwidth, schedule
# says: recursive doubling sends the whole vector
import numpy as np


def halving_doubling_allreduce(comm, x):
    K, r = comm.size, comm.rank
    acc = x.copy()
    P = 1 << (K.bit_length() - 1)
    R = K - P
    if r < 2 * R:
        if r % 2 == 0:
            comm.send(acc, r + 1)
            return comm.recv(r + 1)
        acc = comm.recv(r - 1) + acc
        v = r // 2
    else:
        v = r - R
    mask = 1
    while mask < P:
        pv = v ^ mask
        peer = 2 * pv + 1 if pv < R else pv + R
        comm.send(acc, peer)
        other = comm.recv(peer)
        acc = other + acc if pv < v else acc + other
        mask <<= 1
    if r < 2 * R:
        comm.send(acc, r - 1)
    return acc
