"""Public tests for lab 2: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster


def run_public_tests(vector_clock_run, replicate):
    events = [np.array([[1, 1], [0, 0]]), np.array([[2, 0]])]  # rank 0 sends to 1, then a local event
    res = cluster.run(lambda comm: vector_clock_run(comm, events[comm.rank]), 2, backend="sim", timeout=30)
    np.testing.assert_array_equal(np.asarray(res.values[0]), [[1, 0], [2, 0]], err_msg="rank 0's clocks")
    np.testing.assert_array_equal(np.asarray(res.values[1]), [[1, 1]], err_msg="rank 1's clocks")
    print("ok: vector clocks on 2 ranks")

    values = np.array([1.5, 2.5])

    def run(comm):
        return replicate(comm, values if comm.rank == 0 else np.full(2, np.nan))

    res = cluster.run(run, 3, backend="sim", timeout=30)
    assert np.asarray(res.values[0]).tolist() == [True, True], "with no crash every entry commits"
    np.testing.assert_array_equal(res.values[1], values, err_msg="follower 1's log")
    print("ok: majority commit with no crash")
    print("public tests passed; the grader also injects crashes and tries other world sizes")
