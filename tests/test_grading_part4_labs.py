"""Part IV labs 15-17 through the real grader: the reference grades 100, the blank release 0, and a typical
mistake loses the points of the test that targets it, with a message that names the rule it broke."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grading_helpers import notebook, results
from scaleoutai.grading.labs import assign, find_lab, solution_notebook
from scaleoutai.grading.runner import grade_batch
from scaleoutai.grading.sandbox import Limits

ROOT = Path(__file__).resolve().parents[1]

# lab: (solution text, the mistake, the test that must catch it, words its message must contain)
MISTAKES = {
    "lab15": ("if size >= bucket_bytes:", "if size >= 0:",  # one all-reduce per tensor: no buckets
              "one ring all-reduce per bucket", "one all-reduce per tensor instead of per bucket"),
    "lab16": ("g_block = reduce_scatter(comm, grad_flat)",  # ZeRO-1 traffic: all-reduce, then keep a block
              "g_block = np.array_split(ring_allreduce(comm, grad_flat), comm.size)[comm.rank]",
              "ZeRO-2 sends at most", "all-reducing the gradients costs more"),
    "lab17": ("kept = slot < cap", "kept = slot >= 0",  # capacity ignored: nothing is ever dropped
              "tokens beyond capacity", "got their full output"),
}


def _scores(res: dict) -> dict[str, tuple[float, float, str]]:
    return {t["name"]: (t["score"], t["max_score"], t["output"]) for t in res["tests"]}


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("lab_name", sorted(MISTAKES))
def test_reference_grades_100_blank_release_0_and_a_typical_mistake_is_named(tmp_path, lab_name):
    lab = find_lab(lab_name, ROOT)
    subs = tmp_path / "subs"
    reference = solution_notebook(lab, notebook(subs / "reference.ipynb"))
    shutil.copy(assign(lab, tmp_path / "release") / f"{lab.name}.ipynb", subs / "blank.ipynb")
    right, wrong, target, words = MISTAKES[lab_name]
    text = reference.read_text()
    assert text.count(right) == 1, f"the mistake for {lab_name} no longer matches its solution"
    (subs / "mistake.ipynb").write_text(text.replace(right, wrong))

    summary = grade_batch(lab, [subs], tmp_path / "out", jobs=2, quiet=True, limits=Limits(timeout=60))
    assert summary.graded == 3 and summary.failed == 0

    ref, blank, mistake = (results(tmp_path / "out", s) for s in ("reference", "blank", "mistake"))
    assert ref["score"] == pytest.approx(100) and ref["max_score"] == 100, _scores(ref)
    assert blank["score"] == 0 and blank["max_score"] == 100
    assert all("still raises NotImplementedError" in t["output"] for t in blank["tests"] if t["max_score"] > 0)
    assert "ran to the end" in blank["tests"][0]["output"]  # its demonstration cell catches the stub

    caught = {name: v for name, v in _scores(mistake).items() if name.startswith(target)}
    assert len(caught) == 1
    score, top, output = next(iter(caught.values()))
    assert score < top and words in output
    assert output.startswith("passed ")
    assert mistake["score"] < 100
