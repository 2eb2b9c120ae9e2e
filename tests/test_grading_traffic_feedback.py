"""The grader's own traffic counts reach the student: results.json carries them per case and rank for the
cases visible tests grade, and feedback.html shows them (issue 35, item 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaleoutai.grading.feedback import write_feedback
from scaleoutai.grading.labs import find_lab, solution_notebook
from scaleoutai.grading.runner import grade_batch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_results_and_feedback_carry_the_graders_message_counts_per_rank(tmp_path):
    lab = find_lab("lab01", ROOT)
    subs = tmp_path / "submissions"  # a batch folder: the notebook's stem is the id
    subs.mkdir()
    solution_notebook(lab, subs / "ana.ipynb")
    grade_batch(lab, [subs], tmp_path / "out", jobs=1, quiet=True)
    res = json.loads((tmp_path / "out" / "ana" / "results.json").read_text())
    traffic = res["scaleout"]["traffic"]
    assert 0 < len(traffic) <= 20
    multi = [row for row in traffic if len(row["ranks"]) > 1]
    assert multi and all(sum(r["messages_sent"] for r in row["ranks"]) > 0 for row in multi)
    assert all(sum(r["bytes_sent"] for r in row["ranks"]) == sum(r["bytes_received"] for r in row["ranks"])
               for row in traffic)  # every counted byte sent was received: the grader's own ledger
    write_feedback(tmp_path / "out", lab.name)
    page = (tmp_path / "out" / "ana" / "feedback.html").read_text()
    assert "the grader's counts" in page and traffic[0]["case"].split(",")[0] in page
