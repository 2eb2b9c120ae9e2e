# mutant: every rank sends its whole split to every rank, which keeps the pairs it owns: right, K times the bytes
# loses: traffic
# says: only the pairs it owns
def shuffle_by_key(comm, pairs, R):
    K, r = comm.size, comm.rank
    everything = list(pairs)
    for s in range(1, K):
        everything += decode_pairs(comm.sendrecv(encode_pairs(pairs), (r + s) % K, (r - s) % K))  # noqa: F821
    return [(k, v) for k, v in everything if partition(k, R) % K == r]  # noqa: F821
