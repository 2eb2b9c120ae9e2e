"""Due dates and the late policy: late days at the edges (grace, exactly a day, the cap, extensions), the
policy and times files, and the penalty in each student's results and the gradebook (after hand grading)."""
from __future__ import annotations

import csv
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grading_helpers import notebook
from scaleoutai.cli import main
from scaleoutai.errors import UserError
from scaleoutai.grading.late import LatePolicy, load_policy, load_times
from scaleoutai.grading.roster import parse_roster
from test_grading_roster import ROSTER, fake_grading  # noqa: F401 - the stand-in grader

ROOT = Path(__file__).resolve().parents[1]
DUE = datetime(2026, 12, 5, 23, 59, tzinfo=timezone.utc)
POLICY = LatePolicy(DUE, per_day=10, grace_minutes=15, cap=30, extensions={"amy": DUE + timedelta(days=2)})


@pytest.mark.parametrize("sid,after,days,percent", [
    ("bob", timedelta(minutes=-1), 0, 0),  # early
    ("bob", timedelta(0), 0, 0),  # on the dot
    ("bob", timedelta(minutes=14, seconds=59), 0, 0),  # inside the grace
    ("bob", timedelta(minutes=15), 0, 0),  # the last second of grace
    ("bob", timedelta(minutes=15, seconds=1), 1, 10),  # just past it: a day, counted from the deadline
    ("bob", timedelta(days=1), 1, 10),  # exactly one day
    ("bob", timedelta(days=1, seconds=1), 2, 20),  # one second into the second day
    ("bob", timedelta(days=3), 3, 30),  # at the cap
    ("bob", timedelta(days=9), 9, 30),  # past the cap: 30%, not 90%
    ("amy", timedelta(days=2), 0, 0),  # amy's extension moves her deadline two days
    ("amy", timedelta(days=2, hours=1), 1, 10),  # and late days count from it
])
def test_late_days_and_penalty_at_the_edges(sid, after, days, percent):
    got = POLICY.assess(sid, DUE + after)
    assert (got["days"], got["percent"]) == (days, percent)
    assert got["extension"] == (sid == "amy")


def test_a_policy_file_reads_due_grace_cap_and_extensions_by_date_or_days_through_the_roster(tmp_path):
    (tmp_path / "ext.csv").write_text("id,due,days\nasmith,,1.5\ncarol@uni.edu,2026-12-09T12:00:00+01:00,\n")
    (tmp_path / "late.yaml").write_text("due: 2026-12-05T23:59:00Z\nper_day: 5\ngrace_minutes: 10\ncap: 50\n"
                                        "extensions: ext.csv\n")
    p = load_policy(tmp_path / "late.yaml", parse_roster(ROSTER, "roster.csv"))
    assert (p.due, p.per_day, p.grace_minutes, p.cap) == (DUE, 5, 10, 50)
    assert p.extensions == {"amy": DUE + timedelta(days=1.5), "carol": datetime(2026, 12, 9, 11, 0, tzinfo=timezone.utc)}


@pytest.mark.parametrize("policy,ext,msg", [
    ("per_day: 5\n", "", "needs at least 'due:"),
    ("due: tomorrow\n", "", "'tomorrow' is not a date and time"),
    ("due: 2026-12-05\nper_day: 150\n", "", "per_day must be a number from 0 to 100"),
    ("due: 2026-12-05\npenalty: 5\n", "", "unknown key 'penalty'"),
    ("due: 2026-12-05\nextensions: ext.csv\n", "id,days\nzed,2\n", "ext.csv line 2: 'zed' is not in the roster"),
    ("due: 2026-12-05\nextensions: ext.csv\n", "id,days\namy,two\n", "ext.csv line 2: days must be a number"),
    ("due: 2026-12-05\nextensions: ext.csv\n", "student,days\namy,2\n", "must name the columns id,due or days"),
    ("due: [1\n", "", "cannot read the late policy"),
])
def test_a_bad_policy_is_one_line_naming_the_file(tmp_path, policy, ext, msg):
    (tmp_path / "late.yaml").write_text(policy)
    if ext:
        (tmp_path / "ext.csv").write_text(ext)
    with pytest.raises(UserError) as exc:
        load_policy(tmp_path / "late.yaml", parse_roster(ROSTER, "roster.csv"))
    assert msg in str(exc.value) and str(tmp_path) in str(exc.value) and "\n" not in str(exc.value)


def test_times_come_from_a_csv_through_the_roster_and_a_bad_one_names_its_line(tmp_path):
    (tmp_path / "t.csv").write_text("id,submitted\nASMITH,2026-12-06T01:00:00+00:00\n")
    assert load_times(tmp_path / "t.csv", parse_roster(ROSTER, "r")) == {"amy": datetime(2026, 12, 6, 1, tzinfo=timezone.utc)}
    (tmp_path / "t.csv").write_text("id,submitted\namy,Friday\n")
    with pytest.raises(UserError, match=r"t.csv line 2: 'Friday' is not a date"):
        load_times(tmp_path / "t.csv")


def test_the_penalty_shows_in_results_and_gradebook_and_is_taken_after_hand_grading(tmp_path, capsys, monkeypatch):
    from scaleoutai.grading import runner, slots

    monkeypatch.setattr(slots, "run_slots", fake_grading)
    monkeypatch.setattr(runner, "probe_mode", lambda: "none")
    monkeypatch.setenv("SCALEOUT_ROOT", str(ROOT))
    monkeypatch.chdir(tmp_path)
    for sid, score in (("amy", 8), ("bob", 6), ("carol", 4)):
        notebook(tmp_path / "subs" / f"{sid}.ipynb", f"score = {score}")
    late = DUE + timedelta(days=1, hours=2)  # 2 days late
    os.utime(tmp_path / "subs" / "bob.ipynb", (late.timestamp(), late.timestamp()))  # file time: bob
    (tmp_path / "times.csv").write_text("id,submitted\ncarol,2026-12-05T23:00:00+00:00\n"
                                        "amy,2026-12-07T00:30:00+00:00\n")  # amy: 2 days late but her extension
    (tmp_path / "ext.csv").write_text("id,days\namy,2\n")
    (tmp_path / "late.yaml").write_text("due: 2026-12-05T23:59:00+00:00\nper_day: 10\ncap: 30\nextensions: ext.csv\n")
    (tmp_path / "roster.csv").write_text(ROSTER)
    os.utime(tmp_path / "subs" / "amy.ipynb", (late.timestamp(), late.timestamp()))  # the CSV wins over the file
    assert main(["grade", "lab01", "subs", "--out", "out", "--roster", "roster.csv", "--late-policy", "late.yaml",
                 "--times", "times.csv", "--quiet"]) == 0
    res = json.loads((tmp_path / "out" / "bob" / "results.json").read_text())
    assert (res["scaleout"]["late"]["days"], res["scaleout"]["late"]["percent"]) == (2, 20)
    assert "2 days after the deadline 2026-12-05 23:59 UTC, a late penalty of 20%" in res["output"]
    assert res["score"] == 6  # the autograded score stays as graded; the penalty is in scaleout.final
    (tmp_path / "sheet.csv").write_text("id,stability_explained,readable\nbob,4,\n")
    assert main(["grade-manual", "merge", "lab01", "sheet.csv", "--grades", "out"]) == 0
    book = {r["submission"]: r for r in csv.DictReader((tmp_path / "out" / "gradebook.csv").open())}
    got = {k: (r["late_days"], r["late_percent"], r["late_points"], r["score"]) for k, r in book.items()}
    assert got == {"amy": ("0", "0.0", "0.0", "8.0"), "bob": ("2", "20.0", "2.0", "8.0"),  # (6 + 4) * 0.8
                   "carol": ("0", "0.0", "0.0", "4.0"), "dan": ("", "", "", "")}
    res = json.loads((tmp_path / "out" / "bob" / "results.json").read_text())
    assert res["scaleout"]["final"] == {"auto": 6.0, "manual": 4.0, "late_points": 2.0, "score": 8.0, "max_score": 20.0}
    assert "Total: 6 autograded + 4 by hand - 2 late = 8 of 20." in res["output"]
    assert res["output"].count("late work and hand grading") == 1  # rewritten, never appended twice
    assert "on time for the deadline 2026-12-07 23:59 UTC (your extension)" in \
        json.loads((tmp_path / "out" / "amy" / "results.json").read_text())["output"]


def test_grade_with_a_bad_policy_or_times_file_exits_2_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCALEOUT_ROOT", str(ROOT))
    monkeypatch.chdir(tmp_path)
    notebook(tmp_path / "subs" / "amy.ipynb", "score = 1")
    (tmp_path / "late.yaml").write_text("due: someday\n")
    for extra, shown in ((["--late-policy", "late.yaml"], "late.yaml"), (["--times", "nope.csv"], "nope.csv")):
        assert main(["grade", "lab01", "subs", "--out", "out", "--quiet", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"scaleout: error: {shown}") and "\n" not in err
    assert not (tmp_path / "out").exists()
