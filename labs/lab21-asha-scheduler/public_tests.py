"""Public tests for lab 21: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check

NOTE = "public tests passed; the grader also replays random result sequences and runs K up to 9"


@check
def top_grows_on_disagreement(PASHA):
    """the top grows when the two top rungs disagree"""
    s = PASHA(3, 1, 9, 6, 0.0)  # rungs 1, 3, 9
    assert s.top == 1, "PASHA starts with the two lowest rungs: top = 1"
    assert [s.next_job() for _ in range(3)] == [(0, 0), (1, 0), (2, 0)], "new trials are 0, 1, 2 at rung 0"
    assert [s.on_result(t, 0, x) for t, x in ((0, .5), (1, .9), (2, .7))] == ["continue"] * 3
    assert s.next_job() == (1, 1), "a free worker promotes trial 1 (the best of 3) before starting a new trial"
    assert s.next_job() == (3, 0)
    assert s.on_result(1, 1, .95) == "continue", "rung 1 is the current top: the trial pauses there, it is not stopped"
    assert s.on_result(3, 0, .99) == "promote"
    assert s.next_job() == (3, 1)
    assert s.on_result(3, 1, .2) == "continue" and s.top == 2, \
        "trials 1 and 3 swap places between rungs 0 and 1: the top grows to 2"


@check
def eps_ties_and_last_rung(PASHA):
    """eps, ties to the older trial, the last rung stops"""
    t = PASHA(2, 1, 4, 4, 0.1)  # rungs 1, 2, 4
    assert (t.next_job(), t.next_job()) == ((0, 0), (1, 0))
    assert t.on_result(0, 0, .5) == "continue"
    assert t.on_result(1, 0, .5) == "continue", "a tie goes to the older trial (0)"
    assert (t.next_job(), t.next_job()) == ((0, 1), (2, 0))
    assert t.on_result(0, 1, .6) == "continue"
    assert t.on_result(2, 0, .8) == "promote"
    assert t.next_job() == (2, 1)
    assert t.on_result(2, 1, .65) == "continue" and t.top == 1, "a swap by 0.05 <= eps = 0.1 is no disagreement"
    assert t.next_job() == (3, 0)
    assert t.on_result(3, 0, .9) == "promote" and t.next_job() == (3, 1)
    assert t.on_result(3, 1, .1) == "continue" and t.top == 2, "trials 0 and 3 swap by more than eps"
    assert t.next_job() == (2, 2), "now rung 1 may promote: its best trial goes to rung 2"
    assert t.on_result(2, 2, .7) == "stop", "the last rung stops"
    assert t.best() == (2, .7)
    assert t.next_job() is None


@check
def replay_rows(replay):
    """replay gives one row per job"""
    rows = replay(2, 1, 2, 2, 0.0, [(1, 0, 0, 0), (1, 0, 0, 0), (0, 0, 0, .3), (0, 1, 0, .4), (1, 0, 0, 0)])
    assert rows.shape == (5, 4) and rows[-1].tolist() == [-1, 1, 1, 1], "replay gives [-1, trial, rung, top] per job"


@check
def search_with_one_worker(pasha_search):
    """pasha_search with one worker"""
    curves = np.array([[0.1, 0.2], [0.4, 0.5], [0.3, 0.9], [0.2, 0.3]])
    res = cluster.run(pasha_search, 2, backend="sim", args=(curves, 2, 1, 2, 0.0, 1.0), timeout=30)
    np.testing.assert_allclose(res.values[0], [2, 0.9, 1],
                               err_msg="rank 0 returns [best trial, best score, top]: trial 2 is promoted late")
    assert int(res.values[1]) == 6, "the only worker runs 4 trials at rung 0 and 2 promotions"
