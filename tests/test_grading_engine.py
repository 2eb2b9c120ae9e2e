"""Turning what came back into Gradescope tests: hidden tests load, every failure scores 0 with a reason."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaleoutai.grading.engine import RunReport, grade_run, load_hidden, unimportable_files
from scaleoutai.grading.hub import Outcome
from scaleoutai.grading.jail import import_roots
from scaleoutai.grading.labs import find_lab
from scaleoutai.grading.jail import Limits

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hidden():
    return load_hidden(find_lab("lab04", ROOT))


def test_plan_is_seeded_and_covers_world_sizes_uneven_lengths_dtypes_and_real_processes(hidden):
    again = load_hidden(find_lab("lab04", ROOT))
    assert all(np.array_equal(hidden.plan.inputs[k], again.plan.inputs[k]) for k in hidden.plan.inputs)
    cases = hidden.plan.cases
    assert {c.world_size for c in cases} >= {1, 2, 3, 5, 8}
    assert {c.backend for c in cases} == {"sim", "process"}
    assert any(c.data["n"] < c.world_size for c in cases) and any(c.data["n"] % c.world_size for c in cases)
    assert {c.data["dtype"] for c in cases} == {"float32", "float64", "int64"}
    assert sum(t["points"] for t in hidden.rubric["tests"].values()) == 100


def test_what_a_rank_is_sent_holds_no_grader_only_data(hidden):
    assert all(set(c.public()) == {"id", "fn", "mode", "args", "world_size", "backend", "faults", "timeout"}
               for c in hidden.plan.cases)


def test_the_lab_names_modules_that_exist_to_make_unimportable(hidden):
    files = unimportable_files(hidden, import_roots())
    assert any(name == "scaleoutai.collectives" and f.endswith("collectives.py") for name, f in files)


def test_a_malformed_submission_gets_zero_on_every_test_with_the_reason(hidden):
    res = grade_run(hidden, None, None, Limits(), error="broken.ipynb is not a readable notebook")
    graded = [t for t in res["tests"] if t["max_score"] > 0]
    assert res["score"] == 0 and all("not a readable notebook" in t["output"] for t in graded)


def test_cells_that_never_finish_score_zero_with_the_time_limit_named(hidden):
    run = RunReport({}, None, cells_failure="timeout")
    res = grade_run(hidden, run, [], Limits(timeout=10))
    assert res["score"] == 0 and res["scaleout"]["status"] == "timeout"
    assert "time limit of 10 s" in res["tests"][0]["output"] and res["tests"][0]["status"] == "failed"


def test_a_set_up_failure_reported_by_the_sandbox_is_the_graders_fault_not_the_students(hidden):
    res = grade_run(hidden, RunReport({}, None, setup_error="mount: EPERM"), [], Limits())
    assert res["scaleout"]["status"] == "error" and "tell your instructor" in res["tests"][0]["output"]


def test_stats_are_read_from_the_graders_counts_only(hidden):
    case = next(c for c in hidden.plan.cases if c.world_size == 3 and c.backend == "sim")
    K = case.world_size
    xs = hidden.plan.per_rank(case, "x")
    total = np.sum(np.array(xs, dtype=np.float64), axis=0).astype(case.data["dtype"])
    ranks = [{"type": "ndarray", "stored": True} for _ in range(K)]
    honest = [{"messages_sent": 1, "bytes_sent": 8, "messages_received": 1,
               "bytes_received": 8} for _ in range(K)]
    flood = [dict(s, messages_sent=50, messages_received=50) for s in honest]
    arrays = {f"r{r}": total.copy() for r in range(K)}
    good = Outcome({"ok": True, "ranks": ranks, "stats": honest}, arrays)
    bad = Outcome({"ok": True, "ranks": ranks, "stats": flood}, arrays)
    outcomes = {c.id: Outcome({"ok": False, "error": "x"}) for c in hidden.plan.cases}
    outcomes[case.id] = good
    r_good = grade_run(hidden, RunReport(dict(outcomes), {"errors": [], "log": ""}), [], Limits())
    outcomes[case.id] = bad
    r_bad = grade_run(hidden, RunReport(outcomes, {"errors": [], "log": ""}), [], Limits())
    band = lambda r: next(t for t in r["tests"] if t["name"].startswith("bandwidth"))["score"]  # noqa: E731
    assert band(r_good) > band(r_bad) == 0
