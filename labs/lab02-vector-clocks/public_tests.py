"""Public tests for lab 2: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _run(causal_broadcast, scripts):
    scripts = [np.array(s, dtype=np.int64).reshape(-1, 2) for s in scripts]
    res = cluster.run(lambda comm: causal_broadcast(comm, scripts[comm.rank]), len(scripts), backend="sim",
                      timeout=30)
    return [np.asarray(v) for v in res.values]


NOTE = "public tests passed; the grader also reorders longer runs on up to 7 ranks and reads your messages"


@check
def delivery_rule(deliverable):
    """the delivery rule"""
    assert deliverable(np.array([1, 0]), np.array([0, 0]), 0), "the sender's first message, no other cause"
    assert not deliverable(np.array([2, 0]), np.array([0, 0]), 0), "the sender's first message is missing"
    assert not deliverable(np.array([1, 1, 0]), np.array([0, 0, 0]), 1), "it depends on rank 0's first message"


@check
def two_broadcasts_two_ranks(causal_broadcast):
    """two broadcasts on 2 ranks, own messages delivered at once"""
    got = _run(causal_broadcast, [[[0, 0], [0, 0]], [[1, 0], [1, 0]]])  # rank 0 broadcasts twice, rank 1 reads
    for r, log in enumerate(got):
        assert log.dtype.kind == "i" and log.shape == (2, 2), f"rank {r}'s deliveries: int64 of shape (2, 2)"
        assert log.tolist() == [[0, 1], [0, 2]], f"rank {r} delivered {log.tolist()}"


@check
def hold_back_until_cause(causal_broadcast):
    """a message that arrives before its cause is held back"""
    # rank 0 broadcasts m1; rank 1 delivers it and broadcasts m2; rank 2 reads rank 1's link first
    got = _run(causal_broadcast, [[[0, 0], [1, 1]], [[1, 0], [0, 0]], [[1, 1], [1, 0]]])
    assert got[1].tolist() == [[0, 1], [1, 1]], f"rank 1 delivered {got[1].tolist()}"
    assert got[2].tolist() == [[0, 1], [1, 1]], (f"rank 2 delivered {got[2].tolist()}: m2 = (1, 1) depends on "
                                                 f"m1 = (0, 1) and must wait in the hold-back queue")
