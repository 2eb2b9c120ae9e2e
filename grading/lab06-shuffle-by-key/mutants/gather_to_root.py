# mutant: everything to rank 0, which sorts, combines and hands each rank an equal slice: sorted and balanced,
#   with the whole data through one rank
# loses: traffic
# says: send each rank only its range, directly
def sort_shuffle(comm, pairs, combine=None, s=16):
    K, r = comm.size, comm.rank
    if r:
        comm.send(encode_pairs(pairs), 0)  # noqa: F821
        return decode_pairs(comm.recv(0))  # noqa: F821
    everything = list(pairs)
    for src in range(1, K):
        everything += decode_pairs(comm.recv(src))  # noqa: F821
    everything.sort(key=lambda p: order(p[0]))  # noqa: F821
    if combine == "sum":
        everything = combine_sum(everything)  # noqa: F821
    n = len(everything)
    parts = [everything[n * d // K:n * (d + 1) // K] for d in range(K)]
    if combine == "sum":  # a key must stay on one rank: cut between keys only
        cuts = [0]
        for d in range(1, K):
            cuts.append(max(cuts[-1], n * d // K))
        parts = [everything[cuts[d]:(cuts[d + 1] if d + 1 < K else n)] for d in range(K)]
    for d in range(1, K):
        comm.send(encode_pairs(parts[d]), d)  # noqa: F821
    return parts[0]
