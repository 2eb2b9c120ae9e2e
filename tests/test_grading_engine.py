"""Turning what came back into Gradescope tests: hidden tests load, every failure scores 0 with a reason."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scaleoutai.grading.engine import grade_workdir, load_hidden, prepare_workdir
from scaleoutai.grading.labs import find_lab
from scaleoutai.grading.sandbox import Limits

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


def test_public_plan_sent_to_the_sandbox_holds_no_grader_only_data(hidden, tmp_path):
    prepare_workdir(tmp_path / "w", [{"source": "x = 1", "skip": False}], hidden, Limits(timeout=10), None)
    plan = json.loads((tmp_path / "w" / "plan.json").read_text())
    assert all("data" not in c and "label" not in c for c in plan["cases"])


def test_a_malformed_submission_gets_zero_on_every_test_with_the_reason(hidden):
    res = grade_workdir(hidden, None, None, None, Limits(), error="broken.ipynb is not a readable notebook")
    graded = [t for t in res["tests"] if t["max_score"] > 0]
    assert res["score"] == 0 and all("not a readable notebook" in t["output"] for t in graded)


def test_a_timeout_scores_zero_for_cases_that_never_came_back(hidden, tmp_path):
    prepare_workdir(tmp_path / "w", [], hidden, Limits(timeout=10), None)
    res = grade_workdir(hidden, tmp_path / "w", {"status": -9, "timed_out": True}, [], Limits(timeout=10))
    assert res["score"] == 0 and res["scaleout"]["status"] == "timeout"
    assert "time limit of 10 s" in res["tests"][0]["output"] and res["tests"][0]["status"] == "failed"
