"""`scaleout assign` and `scaleout grade` from the command line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grading_helpers import HONEST, notebook
from scaleoutai.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_assign_writes_the_release(tmp_path, capsys):
    assert main(["assign", "lab01", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "lab01-sharded-gradient" / "lab01-sharded-gradient.ipynb").is_file()
    assert "release written" in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_grade_prints_a_summary_and_writes_results_and_gradebook(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    notebook(tmp_path / "amy" / "lab04.ipynb", HONEST)  # a folder holding one notebook: the id is the folder
    code = main(["grade", "lab04", str(tmp_path / "amy"), "--out", str(tmp_path / "out"), "--jobs", "2",
                 "--timeout", "30", "--quiet"])
    assert code == 0 and "graded 1" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "amy" / "results.json").read_text())["score"] == 100
    assert (tmp_path / "out" / "gradebook.csv").is_file()


@pytest.mark.parametrize("argv,msg", [(["grade", "lab99", "x"], "no lab named"),
                                      (["grade", "lab04", "/nonexistent/sub"], "does not exist"),
                                      (["grade", "export-gradescope", "lab04", "--out", "a.tar"], "usage")])
def test_bad_input_gets_one_line_and_exit_2(argv, msg, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_bad_numbers_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["grade", "lab04", "x", "--jobs", "0"])
    assert "positive" in capsys.readouterr().err


def test_version_prints_the_package_version(capsys):
    from scaleoutai import __version__
    from scaleoutai.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"scaleout-ai {__version__}"
