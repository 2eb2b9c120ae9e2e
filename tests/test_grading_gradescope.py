"""Gradescope export: the zip's run_autograder uses the same engine and writes results/results.json."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grading_helpers import HONEST, notebook
from scaleoutai.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _export(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(ROOT)
    zip_path = tmp_path / "autograder.zip"
    assert main(["grade", "export-gradescope", "lab04", "--out", str(zip_path)]) == 0
    return zip_path


def test_zip_holds_setup_run_autograder_engine_and_hidden_tests_but_not_the_solution(tmp_path, monkeypatch):
    names = zipfile.ZipFile(_export(tmp_path, monkeypatch)).namelist()
    assert {"setup.sh", "run_autograder", "grading/lab04-ring-allreduce/tests.py",
            "grading/lab04-ring-allreduce/rubric.yaml", "src/scaleoutai/grading/runner.py",
            "labs/lab04-ring-allreduce/public_tests.py"} <= set(names)
    assert not [n for n in names if n.endswith("lab04-ring-allreduce.py") or "__pycache__" in n]
    info = zipfile.ZipFile(tmp_path / "autograder.zip").getinfo("run_autograder")
    assert (info.external_attr >> 16) & 0o111


@pytest.mark.timeout(120)
def test_run_autograder_grades_a_submission_into_results_json(tmp_path, monkeypatch):
    root = tmp_path / "autograder"
    zipfile.ZipFile(_export(tmp_path, monkeypatch)).extractall(root / "source")
    os.chmod(root / "source" / "run_autograder", 0o755)
    notebook(root / "submission" / "lab04.ipynb", HONEST)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "SCALEOUT_PYTHON": sys.executable}
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, check=True, timeout=110,
                   cwd=tmp_path)
    res = json.loads((root / "results" / "results.json").read_text())
    assert res["score"] == 100 and res["max_score"] == 100


@pytest.mark.timeout(60)
def test_run_autograder_writes_a_failing_result_when_there_is_nothing_to_grade(tmp_path, monkeypatch):
    root = tmp_path / "autograder"
    zipfile.ZipFile(_export(tmp_path, monkeypatch)).extractall(root / "source")
    (root / "submission").mkdir()
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "SCALEOUT_PYTHON": sys.executable}
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, check=True, timeout=50)
    res = json.loads((root / "results" / "results.json").read_text())
    assert res["score"] == 0 and "exactly one .ipynb" in res["output"]
