"""Public tests for lab 28: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _worker(comm, n, T, bounds, run_cfr_plus, dtype):
    lo, hi = bounds[comm.rank]
    zero = np.zeros((hi - lo, 4, 2), dtype=dtype)
    return run_cfr_plus(comm, n, np.array([lo]), zero, zero, 0, T)


def _check(run_cfr_plus, n, bounds, T, dtype, want=None):
    K = len(bounds)
    res = cluster.run(_worker, K, args=(n, T, bounds, run_cfr_plus, dtype), timeout=60, trace=True)
    out = [np.asarray(v) for v in res.values]
    for r, ((lo, hi), v) in enumerate(zip(bounds, out)):
        assert v.shape == (2, hi - lo, 4, 2), f"K={K}: rank {r} returned shape {v.shape}, expected {(2, hi - lo, 4, 2)}"
        assert v.dtype == np.dtype(dtype), f"K={K}: rank {r} returned {v.dtype}, expected {np.dtype(dtype)}"
    R, S = (np.concatenate([v[j] for v in out]) for j in (0, 1))
    assert (R >= 0).all(), f"K={K}: CFR+ floors every regret at zero after each update"
    if want is not None:
        tol = 1e-9 if np.dtype(dtype) == np.float64 else 1e-4
        assert np.allclose(R, want[0], rtol=tol, atol=tol) and np.allclose(S, want[1], rtol=tol, atol=tol), \
            f"K={K}, {np.dtype(dtype).name}: the tables differ from the same run on one rank"
    item = np.dtype(dtype).itemsize
    for r, (lo, hi) in enumerate(bounds):
        sent = res.stats[r].bytes_sent
        assert sent == 2 * T * (K - 1) * 5 * (hi - lo) * item, \
            f"K={K}: rank {r} sent {sent} B; the protocol sends one (b, 5) block to every other rank per update"
    return R, S


NOTE = "public tests passed; the grader also checks other K, checkpoints, exploitability and every message"


@check
def regret_matching_plus(rm_plus):
    pol = rm_plus(np.array([[0.0, 0.0], [1.0, 3.0]]))
    assert np.allclose(pol, [[0.5, 0.5], [0.25, 0.75]]), "rm_plus: R normalised, uniform where it is all zero"


@check
def terminal_reach_player0(terminal_reach):
    sigma = np.tile(np.array([0.5, 0.5]), (1, 4, 1))
    assert np.allclose(terminal_reach(sigma, 0), [[0.5, 0.5, 0.25, 0.5, 0.25]]), \
        "terminal_reach: player 0 acts at '' and 'pb' (columns in the order TERM)"


@check
def terminal_values_showdown(terminal_values):
    w = terminal_values(np.ones((3, 5)), [2], 0)
    assert np.allclose(w, [[2 / 6, 2 / 6, -2 / 6, 4 / 6, 4 / 6]]), \
        "terminal_values: the king wins every showdown; folds pay +1 ('bp') or -1 ('pbp') to player 0"


@check
def cfr_plus_iterations(run_cfr_plus):
    want = _check(run_cfr_plus, 3, [(0, 3)], 20, np.float64)
    _check(run_cfr_plus, 3, [(0, 1), (1, 3)], 20, np.float64, want)
    _check(run_cfr_plus, 3, [(0, 2), (2, 3), (3, 3)], 20, np.float32, want)
