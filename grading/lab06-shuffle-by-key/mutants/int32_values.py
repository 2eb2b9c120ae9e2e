# mutant: sends the keys as JSON and the values in an int32 array (half the bytes of int64): values beyond 2**31 wrap
# loses: complete
# says: in no rank's split
import json

import numpy as np

REPLACE = [("        got = comm.sendrecv(encode_pairs(outgoing[dst]), dst, src)\n        mine += decode_pairs(got)\n",
            "        mine += _exchange(comm, outgoing[dst], dst, src)\n")]


def _exchange(comm, pairs, dst, src):
    comm.send(np.frombuffer(json.dumps([k for k, _ in pairs]).encode(), dtype=np.uint8), dst)
    comm.send(np.array([v for _, v in pairs], dtype=np.int64).astype(np.int32), dst)
    keys = [_key(k) for k in json.loads(comm.recv(src).tobytes())]  # noqa: F821 - the lab's helper
    return [(k, int(v)) for k, v in zip(keys, comm.recv(src))]
