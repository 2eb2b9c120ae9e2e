"""Batches: every lab's reference grades 100 and its blank release 0; resume, --force, killed batches."""
from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from grading_helpers import HONEST, WRONG, notebook, results
from scaleoutai.grading.labs import assign, find_lab, solution_notebook
from scaleoutai.grading.runner import find_submissions, grade_batch
from scaleoutai.grading.jail import Limits

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("lab_name", ["lab01", "lab02", "lab04"])
def test_reference_grades_100_and_blank_release_grades_0_with_messages(tmp_path, lab_name):
    lab = find_lab(lab_name, ROOT)
    subs = tmp_path / "subs"
    solution_notebook(lab, notebook(subs / "reference.ipynb"))
    shutil.copy(assign(lab, tmp_path / "release") / f"{lab.name}.ipynb", subs / "blank.ipynb")
    summary = grade_batch(lab, [subs], tmp_path / "out", jobs=2, quiet=True, limits=Limits(timeout=40))
    ref, blank = results(tmp_path / "out", "reference"), results(tmp_path / "out", "blank")
    assert summary.graded == 2 and summary.failed == 0
    assert ref["score"] == pytest.approx(100) and ref["max_score"] == 100
    assert blank["score"] == 0 and blank["max_score"] == 100
    graded = [t for t in blank["tests"] if t["max_score"] > 0]
    assert all("still raises NotImplementedError" in t["output"] for t in graded)


def test_find_submissions_accepts_a_notebook_a_folder_with_one_and_a_folder_of_many(tmp_path):
    notebook(tmp_path / "one" / "work.ipynb", "x = 1")
    notebook(tmp_path / "many" / "amy.ipynb", "x = 1")
    notebook(tmp_path / "many" / "bob" / "lab.ipynb", "x = 1")
    notebook(tmp_path / "many" / "two" / "a.ipynb", "x = 1")
    notebook(tmp_path / "many" / "two" / "b.ipynb", "x = 1")
    notebook(tmp_path / "single.ipynb", "x = 1")
    subs = find_submissions([tmp_path / "one", tmp_path / "many", tmp_path / "single.ipynb"])
    assert [(s.id, bool(s.notebook)) for s in subs] == [("one", True), ("amy", True), ("bob", True),
                                                        ("two", False), ("single", True)]
    assert "2 notebooks" in subs[3].problem


def test_rerun_skips_graded_work_force_regrades_and_a_killed_batch_loses_and_duplicates_nothing(tmp_path):
    lab = find_lab("lab04", ROOT)
    subs, out = tmp_path / "subs", tmp_path / "out"
    for i in range(4):
        notebook(subs / f"s{i}.ipynb", HONEST if i % 2 == 0 else WRONG)
    first = grade_batch(lab, [subs], out, jobs=2, quiet=True)
    stamp = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json")}
    again = grade_batch(lab, [subs], out, jobs=2, quiet=True)
    assert (first.graded, again.graded, again.skipped) == (4, 0, 4)
    assert stamp == {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json")}
    # a batch killed halfway: one result never written, a temp file left behind, the gradebook stale
    os.unlink(out / "s3" / "results.json")
    (out / "s3" / ".results.json.abc").write_text("{half")
    (out / "gradebook.csv").write_text("garbage\n")
    resumed = grade_batch(lab, [subs], out, jobs=2, quiet=True)
    assert (resumed.graded, resumed.skipped) == (1, 3)
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert sorted(r["submission"] for r in rows) == ["s0", "s1", "s2", "s3"]
    assert {r["submission"]: float(r["score"]) for r in rows} == {"s0": 100, "s1": 2.5, "s2": 100, "s3": 2.5}
    forced = grade_batch(lab, [subs / "s0.ipynb"], out, jobs=1, quiet=True, force=True)
    assert forced.graded == 1 and json.loads((out / "s0" / "results.json").read_text())["score"] == 100


def test_sandbox_memory_cap_does_not_count_the_graders_own_address_space(tmp_path):
    # A grader that has imported a lot (a notebook kernel, a long test run) can map several GB. The sandbox
    # starts from a fresh zygote, so the student's --memory cap is theirs alone.
    import numpy as np

    reserved = np.empty(3 * 2**30, dtype=np.uint8)  # 3 GiB of address space, never touched
    lab = find_lab("lab04", ROOT)
    solution_notebook(lab, notebook(tmp_path / "subs" / "reference.ipynb"))
    summary = grade_batch(lab, [tmp_path / "subs" / "reference.ipynb"], tmp_path / "out", jobs=1, quiet=True,
                          limits=Limits(timeout=60, memory_mb=2048))
    del reserved
    assert summary.failed == 0
    assert results(tmp_path / "out", "reference")["score"] == pytest.approx(100)


def test_a_py_percent_solution_is_graded_like_its_notebook_and_other_files_are_refused(tmp_path):
    from scaleoutai.cli import UserError
    from scaleoutai.grading.labs import BEGIN, END

    lab = find_lab("lab04", ROOT)
    text = "\n".join(ln for ln in lab.source.read_text().splitlines() if ln.strip() not in (BEGIN, END))
    (tmp_path / "amy.py").write_text(text)
    summary = grade_batch(lab, [tmp_path / "amy.py"], tmp_path / "out", quiet=True, limits=Limits(timeout=40))
    assert summary.graded == 1 and results(tmp_path / "out", "amy")["score"] == pytest.approx(100)
    (tmp_path / "amy.txt").write_text("x")
    with pytest.raises(UserError, match="is not a notebook"):
        find_submissions([tmp_path / "amy.txt"])


def test_released_labs_open_with_a_python_kernel(tmp_path):
    nb = json.loads((assign(find_lab("lab04", ROOT), tmp_path) / "lab04-ring-allreduce.ipynb").read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
