# mutant: sends a count, then every pair in a message of its own: right pairs, one message per pair
# loses: traffic
# says: messages to rank
import numpy as np

REPLACE = [("        got = comm.sendrecv(encode_pairs(outgoing[dst]), dst, src)\n        mine += decode_pairs(got)\n",
            "        mine += _exchange(comm, outgoing[dst], dst, src)\n")]


def _exchange(comm, pairs, dst, src):
    comm.send(np.array([len(pairs)], dtype=np.int64), dst)
    for pair in pairs:
        comm.send(encode_pairs([pair]), dst)  # noqa: F821
    return [p for _ in range(int(comm.recv(src)[0])) for p in decode_pairs(comm.recv(src))]  # noqa: F821
