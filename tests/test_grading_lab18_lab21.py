"""Labs 18 (resumable training) and 21 (ASHA): the grader's own references agree with the library and the
notebooks. Wrong answers are graded by the mutants (tests/test_grading_mutants.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest


ROOT = Path(__file__).resolve().parents[1]

def _hidden(name: str):
    path = ROOT / "grading" / name / "tests.py"
    spec = importlib.util.spec_from_file_location(f"_hidden_{name.replace('-', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("seed", range(4))
def test_lab21_grader_reference_agrees_with_the_library_asha_on_random_results(seed):
    from scaleoutai.parallel.hpo import ASHA

    mod = _hidden("lab21-asha-scheduler")
    rng = np.random.default_rng(seed)
    eta, lo, hi, cap = [(3, 1, 27, 30), (2, 1, 8, 20), (4, 1, 16, 40), (2, 2, 16, 16)][seed]
    grid = rng.integers(0, 4, size=(cap, 8)) / 3.0
    spans = rng.uniform(0.5, 2.0, size=(cap, 8))
    events, _, best = mod.simulate(mod.Reference(eta, lo, hi, cap), 1 + seed, lambda t, k: float(grid[t, k]), 1.0,
                                   lambda t, k: float(spans[t, k]))
    lib = ASHA({"x": (0.0, 1.0)}, eta, lo, hi, cap, seed=0)
    ref = mod.Reference(eta, lo, hi, cap)
    for kind, t, k, s in events:
        if kind == 0:
            assert mod.NAMES[ref.result(t, k, s)] == lib.on_result(t, k, s)
        else:
            job, mine = lib.next_job(), ref.job()
            assert (job.trial, job.rung) == mine if job else mine is None
    assert lib.best()[0] == best[0] and lib.best()[2] == best[1]


def test_lab21_hand_built_sequences_only_report_jobs_that_were_handed_out():
    mod = _hidden("lab21-asha-scheduler")
    for label, (eta, lo, hi, cap, raw) in mod.HAND:
        ref, running = mod.Reference(eta, lo, hi, cap), set()
        for kind, t, k, s in raw:
            if kind == 1:
                job = ref.job()
                if job:
                    running.add(job)
            else:
                assert (t, k) in running, f"{label}: a result for ({t}, {k}) that no job started"
                running.remove((t, k))
                ref.result(t, k, s)


def test_lab18_grader_reference_matches_the_notebook_update_rule():
    mod = _hidden("lab18-resumable-training")
    rng = np.random.default_rng(0)
    data = rng.standard_normal((9, 4))
    traj = mod.trajectory(np.array_split(data, 3), np.zeros(3), 0.05, 5)
    w, v = np.zeros(3), np.zeros(3)
    for _ in range(5):
        v = 0.9 * v + data[:, :3].T @ (data[:, :3] @ w - data[:, 3])
        w = w - 0.05 * v
    np.testing.assert_allclose(traj[-1][0], w, rtol=1e-13)
    np.testing.assert_allclose(traj[-1][1], v, rtol=1e-13)
