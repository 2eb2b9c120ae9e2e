"""Student identity: one id rule across reruns and batch shapes, one gradebook row per student, the roster,
and the Canvas export. Grading itself is replaced by a stand-in (the score is written in the notebook), so
these tests check the runner's bookkeeping, not the sandbox (tests/test_grading_runner.py does that)."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from grading_helpers import notebook
from scaleoutai.cli import main
from scaleoutai.errors import UserError
from scaleoutai.grading import results as R
from scaleoutai.grading import runner, slots
from scaleoutai.grading.jail import Limits
from scaleoutai.grading.labs import find_lab
from scaleoutai.grading.roster import load_roster, parse_roster
from scaleoutai.grading.runner import find_submissions, grade_batch

ROOT = Path(__file__).resolve().parents[1]
ROSTER = ("id,name,email,aliases,canvas_id,section\n"
          "amy,\"Smith, Amy\",amy@uni.edu,asmith;amy_smith,101,A\n"
          "bob,\"Jones, Bob\",bob@uni.edu,,102,A\n"
          "carol,\"Lee, Carol\",carol@uni.edu,carol_v2,103,B\n"
          "dan,\"Roe, Dan\",dan@uni.edu,,104,B\n")


def fake_grading(lab, todo, out, base, uids, limits, summary, tick):
    """Stands in for the sandboxes: the notebook's first cell is 'score = N'."""
    for sub in todo:
        score = float(json.loads(sub.notebook.read_text())["cells"][0]["source"].split("=")[1])
        R.write_results(out / sub.id / "results.json",
                        R.make_results([R.test_entry("t", score, 10, "")], "", 0.0, {"status": "ok"}))
        summary.graded += 1
        tick(1)


@pytest.fixture
def grade(monkeypatch):
    monkeypatch.setattr(slots, "run_slots", fake_grading)
    monkeypatch.setattr(runner, "probe_mode", lambda: "none")
    lab = find_lab("lab01", ROOT)

    def run(paths, out, **kw):
        return grade_batch(lab, list(paths), out, quiet=True, limits=Limits(mode="none"), **kw)
    return run


def rows(out: Path) -> dict[str, dict]:
    table = list(csv.DictReader((out / "gradebook.csv").open()))
    assert len({r["submission"] for r in table}) == len(table), "two rows for one student"
    return {r["submission"]: r for r in table}


def test_a_notebook_keeps_its_stem_alone_in_a_batch_folder_among_classmates_or_named_directly(tmp_path):
    subs = tmp_path / "submissions"
    notebook(subs / "amy.ipynb", "score = 1")
    assert [s.id for s in find_submissions([subs])] == ["amy"]  # was "submissions-2": the folder's name
    notebook(subs / "bob.ipynb", "score = 1")
    notebook(subs / "dan" / "lab01.ipynb", "score = 1")  # a folder of one student's files
    assert [s.id for s in find_submissions([subs])] == ["amy", "bob", "dan"]
    assert [s.id for s in find_submissions([subs / "amy.ipynb", subs / "dan"])] == ["amy", "dan"]


def test_the_roster_names_students_by_id_alias_email_or_folder_in_any_case(tmp_path):
    roster = parse_roster(ROSTER, "roster.csv")
    subs = tmp_path / "subs"
    notebook(subs / "ASmith.ipynb", "score = 1")
    notebook(subs / "bob@uni.edu" / "lab.ipynb", "score = 1")
    notebook(subs / "submission_7" / "carol_v2.ipynb", "score = 1")  # the folder is unknown, its notebook not
    notebook(subs / "zed.ipynb", "score = 1")
    assert [s.id for s in find_submissions([subs], roster)] == ["amy", "zed", "bob", "carol"]
    notebook(tmp_path / "folder" / "dan.ipynb", "score = 1")  # a folder with one notebook the roster knows
    assert [s.id for s in find_submissions([tmp_path / "folder"], roster)] == ["dan"]


def test_three_reruns_that_add_remove_and_rename_keep_one_row_per_student(grade, tmp_path):
    subs, out = tmp_path / "submissions", tmp_path / "out"
    notebook(subs / "amy.ipynb", "score = 7")
    grade([subs], out)
    assert list(rows(out)) == ["amy"]
    notebook(subs / "bob.ipynb", "score = 5")  # add
    notebook(subs / "carol.ipynb", "score = 3")
    second = grade([subs], out)
    assert (second.graded, second.skipped) == (2, 1) and list(rows(out)) == ["amy", "bob", "carol"]
    (subs / "bob.ipynb").unlink()  # remove: bob keeps the row he was graded for
    (subs / "carol.ipynb").rename(subs / "carol_v2.ipynb")  # rename: the roster's alias says who it is
    notebook(subs / "amy.ipynb", "score = 9")  # a changed notebook is graded again, into the same row
    (tmp_path / "roster.csv").write_text(ROSTER)
    third = grade([subs], out, roster=load_roster(tmp_path / "roster.csv"))
    book = rows(out)
    assert (third.graded, third.skipped) == (1, 1)
    assert {k: (r["score"], r["status"]) for k, r in book.items()} == {
        "amy": ("9.0", "ok"), "bob": ("5.0", "ok"), "carol": ("3.0", "ok"), "dan": ("", "missing")}
    assert book["carol"]["name"] == "Lee, Carol"
    assert "missing (1 in" in third.line() and third.line().count("\n") == 1  # dan, in one line
    fourth = grade([subs / "carol_v2.ipynb"], out)  # no --roster: the kept one names it the same
    assert fourth.skipped == 1 and list(rows(out)) == ["amy", "bob", "carol", "dan"]


def test_a_result_graded_under_an_old_name_from_the_same_file_is_replaced_not_duplicated(grade, tmp_path):
    subs, out = tmp_path / "submissions", tmp_path / "out"
    notebook(subs / "amy.ipynb", "score = 7")
    grade([subs], out)
    os.replace(out / "amy", out / "submissions-2")  # what the old rule wrote for a folder holding one notebook
    notebook(subs / "bob.ipynb", "score = 5")
    summary = grade([subs], out)
    assert list(rows(out)) == ["amy", "bob"] and "submissions-2 -> amy" in summary.line()
    assert len(list((out / ".replaced").iterdir())) == 1  # kept for audit, out of the gradebook
    notebook(tmp_path / "late" / "amy_smith.ipynb", "score = 8")
    grade([tmp_path / "late" / "amy_smith.ipynb"], out)  # no roster yet: a row of its own
    assert list(rows(out)) == ["amy", "amy_smith", "bob"]
    (tmp_path / "roster.csv").write_text(ROSTER)  # the roster says amy_smith is amy: her own row stays
    summary = grade([subs], out, roster=load_roster(tmp_path / "roster.csv"))
    assert list(rows(out)) == ["amy", "bob", "carol", "dan"] and "amy_smith -> amy" in summary.line()


def test_two_submissions_of_one_roster_student_grade_the_newest_and_say_so(grade, tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    old = notebook(subs / "amy.ipynb", "score = 2")
    new = notebook(subs / "asmith.ipynb", "score = 6")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    summary = grade([subs], out, roster=parse_roster(ROSTER, "roster.csv"))
    assert rows(out)["amy"]["score"] == "6.0" and f"grading the newest, {new}" in summary.line()


@pytest.mark.parametrize("text,msg", [
    ("id,name\namy,Amy\n", "must name the columns id,name,email (missing email)"),
    ("id,name,email\namy,A,a@x\namy,B,b@x\n", "line 3: id 'amy' appears twice"),
    ("id,name,email,aliases\namy,A,a@x,bo\nbob,B,b@x,bo\n", "line 3: 'bo' already names 'amy'"),
    ("id,name,email\namy smith,A,a@x\n", "line 2: id 'amy smith' may hold only"),
    ("id,name,email\ngradebook,A,a@x\n", "line 2: id 'gradebook' may hold only"),
    ("id,name,email\n,A,a@x\n", "line 2: the id is empty"),
    ("id,name,email\n", "no students")])
def test_a_bad_roster_is_one_line_naming_the_file_and_line(tmp_path, text, msg):
    (tmp_path / "r.csv").write_text(text)
    with pytest.raises(UserError, match="r.csv") as exc:
        load_roster(tmp_path / "r.csv")
    assert msg in str(exc.value) and "\n" not in str(exc.value)


def test_grade_with_a_bad_roster_exits_2_in_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    notebook(tmp_path / "subs" / "amy.ipynb", "score = 1")
    (tmp_path / "r.csv").write_text("id,name\namy,A\n")
    for roster in ("r.csv", "nope.csv"):
        monkeypatch.chdir(tmp_path)
        assert main(["grade", "lab01", "subs", "--out", "out", "--roster", roster, "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"scaleout: error: {roster}") and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_canvas_export_has_the_canvas_header_and_one_row_per_roster_student(grade, tmp_path, capsys, monkeypatch):
    subs, out = tmp_path / "subs", tmp_path / "out"
    notebook(subs / "amy.ipynb", "score = 7.5")
    notebook(subs / "bob.ipynb", "score = 5")
    grade([subs], out, roster=parse_roster(ROSTER, "roster.csv"))
    monkeypatch.chdir(ROOT)
    assert main(["grade", "export-canvas", "lab01", str(out), "--out", str(tmp_path / "c.csv"),
                 "--canvas-id", "4711"]) == 0
    assert "4 students" in capsys.readouterr().out
    table = list(csv.reader((tmp_path / "c.csv").open()))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "lab01-sharded-gradient (4711)"]
    assert table[1] == ["    Points Possible", "", "", "", "", "20"]  # 10 autograded (stand-in) + 10 by hand
    assert table[2:] == [["Smith, Amy", "101", "amy", "amy@uni.edu", "A", "7.5"],
                         ["Jones, Bob", "102", "bob", "bob@uni.edu", "A", "5"],
                         ["Lee, Carol", "103", "carol", "carol@uni.edu", "B", ""],
                         ["Roe, Dan", "104", "dan", "dan@uni.edu", "B", ""]]


def test_canvas_export_errors_name_the_path_typed_and_write_nothing(grade, tmp_path, capsys, monkeypatch):
    notebook(tmp_path / "subs" / "amy.ipynb", "score = 1")
    grade([tmp_path / "subs"], tmp_path / "out")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCALEOUT_ROOT", str(ROOT))
    (tmp_path / "taken").write_text("a file where a folder should be")
    for argv, msg in [(["lab01", "out", "--out", "c.txt"], "usage: scaleout grade export-canvas"),
                      (["lab01", "nowhere", "--out", "c.csv"], "nowhere: no graded submissions"),
                      (["lab01", "out", "--out", "taken/c.csv"], "cannot write taken/c.csv")]:
        assert main(["grade", "export-canvas", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err
    assert not list(tmp_path.glob("*.csv*"))  # no sheet, no temp file
