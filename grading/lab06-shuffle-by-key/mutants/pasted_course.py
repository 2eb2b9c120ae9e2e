# mutant: the course's hash shuffle (run_mapreduce and partition_of of scaleoutai.data.mapreduce) copied and
#   adapted by hand: local combine, blake2b hash partition p mod K, one exchange, sum at the reducer
# loses: sorted, balance, correct_process
# says: the lab asks for a range-partitioned, sorted shuffle
# score-at-most: 50
import hashlib


def stable_hash(key):
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")


def sort_shuffle(comm, pairs, combine=None, s=16):
    K, r = comm.size, comm.rank
    mapped = list(pairs)
    if combine == "sum":  # one value per key leaves this rank: less to shuffle
        groups = {}
        for key, value in mapped:
            groups.setdefault(key, []).append(value)
        mapped = [(key, sum(values)) for key, values in groups.items()]
    outgoing = [[] for _ in range(K)]
    for key, value in mapped:
        outgoing[stable_hash(key) % K].append((key, value))
    incoming = list(outgoing[r])
    for step in range(1, K):
        dst, src = (r + step) % K, (r - step) % K
        incoming += decode_pairs(comm.sendrecv(encode_pairs(outgoing[dst]), dst, src))  # noqa: F821
    if combine != "sum":
        return incoming
    groups = {}
    for key, value in incoming:
        groups.setdefault(key, []).append(value)
    return [(key, sum(values)) for key, values in groups.items()]
