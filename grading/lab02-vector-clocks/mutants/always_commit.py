# mutant: the leader commits every entry it sent, majority or not
# loses: majority_lost
import numpy as np

_right = replicate  # noqa: F821 - the reference defined above


def replicate(comm, entries):
    out = _right(comm, entries)
    return np.ones(len(entries), dtype=bool) if comm.rank == 0 else out
