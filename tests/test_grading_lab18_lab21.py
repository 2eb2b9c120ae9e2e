"""Labs 18 (resumable training) and 21 (ASHA) through the real grader: the reference grades 100, the blank
release 0 with a message per test, and typical wrong answers lose the points of the property they break."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import jupytext
import numpy as np
import pytest

from grading_helpers import results
from scaleoutai.grading.labs import BEGIN, END, assign, find_lab
from scaleoutai.grading.runner import grade_batch
from scaleoutai.grading.sandbox import Limits

ROOT = Path(__file__).resolve().parents[1]

LAB18_WRONG = {
    # writes over the checkpoint in place: a save cut off half-way tears it
    "in_place": ("    fd, tmp = tempfile.mkstemp(prefix=\".writing-\", suffix=\".tmp\", dir=folder)\n",
                 "    fd, tmp = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), path\n"),
    # ignores the checkpoints: right answer, but redoes every step before the crash
    "from_scratch": ("    found = latest_checkpoint(ckpt_dir)\n    if found is None:",
                     "    found = None\n    if found is None:"),
    # saves the parameters only: the restart loses the momentum
    "no_velocity": ('{"step": s + 1, "params": w, "velocity": v}', '{"step": s + 1, "params": w}'),
}
LAB21_WRONG = {
    # ties go to the newer trial
    "ties": ("key=lambda t: (-seen[t], t))\n        return [t", "key=lambda t: (-seen[t], -t))\n        return [t"),
    # rank 0 collects results round-robin instead of in order of finish time
    "round_robin": ("w = min(busy, key=lambda q: (busy[q][0], q))", "w = min(busy)"),
}


def _notebook(text: str, dest: Path) -> None:
    text = "\n".join(ln for ln in text.splitlines() if ln.strip() not in (BEGIN, END))
    dest.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.reads(text, fmt="py:percent"), dest, fmt="ipynb")


def _grade(tmp_path: Path, name: str, wrong: dict[str, tuple[str, str]]) -> dict[str, dict]:
    lab = find_lab(name, ROOT)
    subs = tmp_path / "subs"
    source = lab.source.read_text()
    _notebook(source, subs / "reference.ipynb")
    for key, (old, new) in wrong.items():
        assert source.count(old) == 1, f"the mutation {key} no longer matches the solution"
        _notebook(source.replace(old, new), subs / f"{key}.ipynb")
    shutil.copy(assign(lab, tmp_path / "release") / f"{lab.name}.ipynb", subs / "blank.ipynb")
    summary = grade_batch(lab, [subs], tmp_path / "out", jobs=2, quiet=True, limits=Limits(timeout=60))
    assert summary.graded == 2 + len(wrong)
    return {s: results(tmp_path / "out", s) for s in ["reference", "blank", *wrong]}


def _scores(res: dict) -> list[float]:
    """Fraction of the points of each graded test, in the order of the lab's TESTS."""
    return [t["score"] / t["max_score"] for t in res["tests"] if t["max_score"] > 0]


def _check_reference_and_blank(graded: dict[str, dict]) -> None:
    ref, blank = graded["reference"], graded["blank"]
    assert ref["scaleout"]["status"] == "ok", ref["tests"][0]["output"]
    assert ref["score"] == pytest.approx(100) and ref["max_score"] == 100, [t["output"] for t in ref["tests"]]
    assert blank["score"] == 0 and blank["max_score"] == 100
    for t in blank["tests"]:
        if t["max_score"] > 0:
            assert "NotImplementedError" in t["output"], t["output"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_lab18_reference_100_blank_0_and_each_mistake_loses_its_test(tmp_path):
    graded = _grade(tmp_path, "lab18", LAB18_WRONG)
    _check_reference_and_blank(graded)
    # [train, resume, intact, atomic]
    assert _scores(graded["in_place"]) == [1, 1, 1, 0]  # only the save cut off half-way catches it
    assert "is gone" in graded["in_place"]["tests"][4]["output"]
    scratch = _scores(graded["from_scratch"])
    assert scratch[0] == scratch[2] == scratch[3] == 1 and 0 < scratch[1] < 1  # right params, too many steps redone
    assert "redid" in graded["from_scratch"]["tests"][2]["output"]
    no_v = _scores(graded["no_velocity"])
    assert no_v[0] == 1 and no_v[1] < 1 and no_v[2] < 0.5  # checkpoints are incomplete
    assert "do not load" in graded["no_velocity"]["tests"][3]["output"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_lab21_reference_100_blank_0_and_each_mistake_loses_its_test(tmp_path):
    graded = _grade(tmp_path, "lab21", LAB21_WRONG)
    _check_reference_and_blank(graded)
    ties = _scores(graded["ties"])  # [decisions, jobs, driver]
    assert ties[0] < 1 and ties[1] < 1
    assert "first wrong one: event" in graded["ties"]["tests"][1]["output"]
    rr = _scores(graded["round_robin"])
    assert rr[0] == rr[1] == 1 and rr[2] < 1
    assert "jobs" in graded["round_robin"]["tests"][3]["output"]


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
