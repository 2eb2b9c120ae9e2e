"""Grading by hand: the rubric's manual items, the score sheet, its merge into the gradebook, and bad sheets
(one line naming the sheet, exit 2, nothing written)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from grading_helpers import notebook
from scaleoutai.cli import main
from scaleoutai.grading.labs import find_lab
from scaleoutai.grading.manual import manual_items
from test_grading_roster import ROSTER, fake_grading

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def graded(tmp_path, monkeypatch):
    """lab01 graded for amy (7) and bob (5) into tmp_path/out with the roster; cwd is tmp_path."""
    from scaleoutai.grading import runner, slots

    monkeypatch.setattr(slots, "run_slots", fake_grading)
    monkeypatch.setattr(runner, "probe_mode", lambda: "none")
    monkeypatch.setenv("SCALEOUT_ROOT", str(ROOT))
    monkeypatch.chdir(tmp_path)
    notebook(tmp_path / "subs" / "amy.ipynb", "score = 7")
    notebook(tmp_path / "subs" / "bob.ipynb", "score = 5")
    (tmp_path / "roster.csv").write_text(ROSTER)
    assert main(["grade", "lab01", "subs", "--out", "out", "--roster", "roster.csv", "--quiet"]) == 0
    return tmp_path / "out"


def book(out: Path) -> dict[str, dict]:
    return {r["submission"]: r for r in csv.DictReader((out / "gradebook.csv").open())}


def test_labs_mark_items_for_hand_grading_in_their_rubric():
    items = manual_items(find_lab("lab01", ROOT))
    assert {k: p for k, (p, _) in items.items()} == {"stability_explained": 5.0, "readable": 5.0}
    assert all(len(d) > 20 for _, d in items.values())  # the description says what earns the points
    assert sum(p for p, _ in manual_items(find_lab("lab14", ROOT)).values()) == 10
    assert manual_items(find_lab("lab02", ROOT)) == {}


def test_the_sheet_lists_every_graded_student_and_the_merge_adds_the_points_to_the_autograded_ones(graded, capsys):
    assert main(["grade-manual", "sheet", "lab01", "--grades", "out", "--out", "sheet.csv"]) == 0
    assert "score sheet for 2 students written to sheet.csv" in capsys.readouterr().out
    rows = list(csv.reader(Path("sheet.csv").open()))
    assert rows == [["id", "name", "stability_explained", "readable", "comments"],
                    ["(max points)", "", "5", "5", ""], ["amy", "Smith, Amy", "", "", ""], ["bob", "Jones, Bob", "", "", ""]]
    rows[2][2:] = ["4.5", "5", "clear, but say why e^{-|m|} is safe"]
    rows[3][2] = "2"  # readable left blank: not graded yet
    with open("sheet.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert main(["grade-manual", "merge", "lab01", "sheet.csv", "--grades", "out"]) == 0
    b = book(graded)
    assert (b["amy"]["auto"], b["amy"]["manual"], b["amy"]["score"], b["amy"]["max_score"]) == ("7.0", "9.5", "16.5", "20.0")
    assert (b["bob"]["manual"], b["bob"]["score"], b["bob"]["manual: readable"]) == ("2.0", "7.0", "")
    assert b["carol"]["status"] == "missing"
    res = json.loads((graded / "amy" / "results.json").read_text())
    assert res["scaleout"]["manual"]["comments"] == "clear, but say why e^{-|m|} is safe"
    assert "Graded by hand: 9.5 of 10 points (stability_explained 4.5/5, readable 5/5)" in res["output"]
    # a second sheet is prefilled with what was merged; a blank cell keeps a score, a number replaces it
    assert main(["grade-manual", "sheet", "lab01", "--grades", "out", "--out", "sheet.csv"]) == 2
    assert "sheet.csv exists" in capsys.readouterr().err
    assert main(["grade-manual", "sheet", "lab01", "--grades", "out", "--out", "sheet.csv", "--force"]) == 0
    assert list(csv.reader(Path("sheet.csv").open()))[3] == ["bob", "Jones, Bob", "2", "", ""]
    Path("more.csv").write_text("id,readable\nbob,3\n")
    assert main(["grade-manual", "merge", "lab01", "more.csv", "--grades", "out"]) == 0
    assert (book(graded)["bob"]["manual"], book(graded)["amy"]["manual"]) == ("5.0", "9.5")


@pytest.mark.parametrize("sheet,msg", [
    ("id,readable\nzed,3\n", "more.csv line 2: unknown id 'zed'"),
    ("id,readable\namy,6\n", "more.csv line 2: readable = '6' for 'amy' must be a number from 0 to its 5 points"),
    ("id,readable\namy,-1\n", "must be a number from 0"),
    ("id,readable\namy,good\n", "readable = 'good'"),
    ("id,readable\namy,2\nASMITH,3\n", "more.csv line 3: 'amy' has a second row"),
    ("id,style\namy,2\n", "more.csv: column 'style' is no manual item of this lab"),
    ("student,readable\namy,2\n", "more.csv: the first line must name the columns id"),
])
def test_a_bad_sheet_is_one_line_exit_2_and_changes_nothing(graded, capsys, sheet, msg):
    Path("ok.csv").write_text("id,readable\namy,4\n")
    assert main(["grade-manual", "merge", "lab01", "ok.csv", "--grades", "out"]) == 0
    before = {p: p.read_bytes() for p in graded.rglob("*") if p.is_file()}
    Path("more.csv").write_text(sheet)
    capsys.readouterr()
    assert main(["grade-manual", "merge", "lab01", "more.csv", "--grades", "out"]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and "\n" not in err
    assert {p: p.read_bytes() for p in graded.rglob("*") if p.is_file()} == before


def test_manual_commands_name_the_path_typed_when_there_is_nothing_to_grade(graded, capsys):
    for argv, msg in [(["sheet", "lab02", "--grades", "out"], "has no manual: items"),
                      (["sheet", "lab01", "--grades", "elsewhere"], "elsewhere: no graded submissions of lab01"),
                      (["merge", "lab01", "missing.csv", "--grades", "out"], "missing.csv: cannot read the score sheet")]:
        assert main(["grade-manual", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err
