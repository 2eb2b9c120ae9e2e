# mutant: everything goes to rank 0, which partitions it and sends each rank its part
# loses: traffic
def shuffle_by_key(comm, pairs, R):
    K, r = comm.size, comm.rank
    if K == 1:
        return list(pairs)
    if r:
        comm.send(encode_pairs(pairs), 0)  # noqa: F821
        return decode_pairs(comm.recv(0))  # noqa: F821
    everything = list(pairs)
    for src in range(1, K):
        everything += decode_pairs(comm.recv(src))  # noqa: F821
    parts = [[] for _ in range(K)]
    for k, v in everything:
        parts[partition(k, R) % K].append((k, v))  # noqa: F821
    for dst in range(1, K):
        comm.send(encode_pairs(parts[dst]), dst)  # noqa: F821
    return parts[0]
