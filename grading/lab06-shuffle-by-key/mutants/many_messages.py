# mutant: sends a count, then every pair in a message of its own: the right data, one message per pair
# loses: traffic
# says: messages to rank
import numpy as np

REPLACE = [("    received = all_to_all(comm, [encode_pairs(out) for out in outgoing])",
            "    received = _exchange(comm, outgoing)")]


def _exchange(comm, outgoing):
    K, me = comm.size, comm.rank
    got = [encode_pairs(outgoing[me])]  # noqa: F821
    for shift in range(1, K):
        to, frm = (me + shift) % K, (me - shift) % K
        n = int(comm.sendrecv(np.array([len(outgoing[to])], dtype=np.int64), to, frm)[0])
        for pair in outgoing[to]:
            comm.send(encode_pairs([pair]), to)  # noqa: F821
        got.append(encode_pairs([p for _ in range(n) for p in decode_pairs(comm.recv(frm))]))  # noqa: F821
    return got
