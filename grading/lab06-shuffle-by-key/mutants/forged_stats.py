# mutant: gathers to rank 0 (the wrong algorithm) and patches comm.stats to look like one small exchange
# loses: traffic
def sort_shuffle(comm, pairs, combine=None, s=16):
    K, r = comm.size, comm.rank
    if r:
        comm.send(encode_pairs(pairs), 0)  # noqa: F821
        mine = decode_pairs(comm.recv(0))  # noqa: F821
    else:
        everything = sorted(pairs, key=lambda p: order(p[0]))  # noqa: F821
        for src in range(1, K):
            everything = sorted(everything + decode_pairs(comm.recv(src)), key=lambda p: order(p[0]))  # noqa: F821
        if combine == "sum":
            everything = combine_sum(everything)  # noqa: F821
        keys = sorted({order(k) for k, _ in everything})  # noqa: F821
        owner = {kk: min(K - 1, i * K // max(1, len(keys))) for i, kk in enumerate(keys)}
        parts = [[] for _ in range(K)]
        for i, (k, v) in enumerate(everything):
            parts[owner[order(k)] if combine else min(K - 1, i * K // len(everything))].append((k, v))  # noqa: F821
        for dst in range(1, K):
            comm.send(encode_pairs(parts[dst]), dst)  # noqa: F821
        mine = parts[0]
    comm.stats.messages_sent, comm.stats.bytes_sent = K - 1, 8 * len(pairs)
    return mine
