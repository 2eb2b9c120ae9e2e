"""HTML feedback from results.json: a page per student, the instructor's gradebook with per-test statistics,
and `scaleout grade` writing both after the batch."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from scaleoutai.cli import main
from scaleoutai.grading import feedback as F
from scaleoutai.grading.results import make_results, write_results
from scaleoutai.grading.results import test_entry as entry

HOSTILE = '<script>alert("x")</script><img src=http://evil.example/p.png onerror=alert(1)>'


def _results(scores: dict[str, float], output: str = "", traffic: list | None = None, vis: dict | None = None) -> dict:
    points = {"correct": 40.0, "traffic": 30.0, "random": 30.0}
    entries = [entry("Notebook runs in the grader", 0, 0, "your notebook ran to the end", "visible", "passed")]
    for name, got in scores.items():
        bad = f"passed 1 of 3 cases\n- K=3, n=10: {output or 'wrong sum'}"
        msg = "passed 3 of 3 cases" if got >= points[name] else bad
        entries.append(entry(name, got, points[name], msg, (vis or {}).get(name, "visible")))
    extra = {"status": "ok", "isolation": "full"}
    if traffic is not None:
        extra["traffic"] = traffic
    return make_results(entries, "Lab 99: a demo\nscore", 1.0, extra)


def _batch(out: Path, rows: dict[str, dict]) -> Path:
    for sid, res in rows.items():
        write_results(out / sid / "results.json", res)
    return out


def _text(page: str) -> str:
    """What a reader sees: tags dropped, entities left escaped."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S)))


def _self_contained(page: str) -> bool:
    lowered = page.lower()
    return not any(s in lowered for s in ("<script", "<link", "<img", "<iframe", "@import", "url(", 'src="', "http://",
                                          "https://"))


def test_student_page_shows_scores_per_test_each_failing_case_and_the_teaching_message():
    page = F.feedback_html(_results({"correct": 40, "traffic": 10, "random": 30},
                                    output="rank 2's sum is off by x[3]: send each chunk once"), "ana", "lab99-demo")
    text = _text(page)
    assert "Score: 80 of 100" in text
    assert re.search(r"correct 40 / 40 passed", text) and re.search(r"traffic 10 / 30 failed", text)
    assert "- K=3, n=10: rank 2&#x27;s sum is off by x[3]: send each chunk once" in page
    assert page.startswith("<!DOCTYPE html>") and _self_contained(page)


def test_everything_a_submission_controls_is_escaped_and_nothing_loads_from_outside():
    res = _results({"correct": 0, "traffic": 0, "random": 0}, output=HOSTILE)
    res["tests"][1]["name"] = "<b>bold</b>"
    page = F.feedback_html(res, '<i>id</i>', "lab99")
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page and "<i>id" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert _self_contained(page.replace("http://evil.example", ""))  # the only URL is the escaped hostile text


def test_hidden_tests_show_neither_score_nor_output():
    res = _results({"correct": 40, "traffic": 0, "random": 30}, output="the secret case", vis={"traffic": "hidden"})
    text = _text(F.feedback_html(res, "ana"))
    assert "traffic hidden shown later" in text and "the secret case" not in text


def test_the_graders_traffic_figures_are_shown_when_results_carry_them():
    traffic = [{"case": "K=3, n=10", "ranks": [{"messages_sent": 4, "bytes_sent": 12345, "messages_received": 4,
                                                "bytes_received": 999}, {"messages_sent": "junk"}]}]
    text = _text(F.feedback_html(_results({"correct": 40}, traffic=traffic), "ana"))
    assert "What your ranks sent (the grader's counts)" in text
    assert "K=3, n=10 0 4 12,345 4 999" in text and "K=3, n=10 1 0 0 0 0" in text
    assert "What your ranks sent" not in _text(F.feedback_html(_results({"correct": 40}), "ana"))


def test_gradebook_counts_who_lost_each_test_and_its_mean_score(tmp_path):
    out = _batch(tmp_path, {"ana": _results({"correct": 40, "traffic": 30, "random": 30}),
                            "ben": _results({"correct": 40, "traffic": 0, "random": 15}),
                            "cy": _results({"correct": 20, "traffic": 0, "random": 30})})
    subs, rows = F.class_stats(out)
    assert [s for s, _ in subs] == ["ana", "ben", "cy"]
    stats = {r["name"]: (r["lost"], r["n"], round(r["mean"], 6)) for r in rows}
    assert stats == {"correct": (1, 3, 33.333333), "traffic": (2, 3, 10.0), "random": (1, 3, 25.0)}
    text = _text(F.gradebook_html(out, "lab99"))
    assert "3 submissions; mean score 68.3." in text
    order = [text.index(f" {n} ") for n in ("traffic", "correct", "random")]  # the hardest test first
    assert order == sorted(order) and "traffic 30 2 of 3 10.00 33%" in text


def test_write_feedback_puts_a_page_beside_every_results_json_and_skips_unreadable_ones(tmp_path):
    out = _batch(tmp_path, {"ana": _results({"correct": 40}), "ben": _results({"correct": 0})})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{ not json")
    (tmp_path / "linked").mkdir()
    os.symlink(tmp_path / "ana" / "results.json", tmp_path / "linked" / "results.json")
    n, book = F.write_feedback(out, "lab99")
    assert n == 2 and book == out / "gradebook.html"
    assert (out / "ana" / "feedback.html").is_file() and (out / "ben" / "feedback.html").is_file()
    assert not (out / "broken" / "feedback.html").exists() and not (out / "linked" / "feedback.html").exists()
    page = book.read_text()
    assert 'href="ana/feedback.html"' in page and "broken" not in page and _self_contained(page)
    assert oct((out / "ana" / "feedback.html").stat().st_mode & 0o777) == "0o644"


def test_scaleout_grade_writes_feedback_and_the_gradebook_page_after_the_batch(tmp_path, monkeypatch, capsys):
    """The CLI hook, with the batch itself replaced by one that writes two results (the grader is tested elsewhere)."""
    from scaleoutai.grading import runner

    def fake_batch(lab, paths, out, **kw):
        _batch(out, {"ana": _results({"correct": 40}), "ben": _results({"correct": 10})})
        return runner.Summary(graded=2, out=out)

    monkeypatch.setattr(runner, "grade_batch", fake_batch)
    nb = tmp_path / "ana.ipynb"
    nb.write_text(json.dumps({"cells": []}))
    assert main(["grade", "lab21", str(nb), "--out", str(tmp_path / "grades"), "--quiet"]) == 0
    out = capsys.readouterr().out
    book = tmp_path / "grades" / "gradebook.html"
    assert f"feedback: 2 feedback.html pages beside the results; class statistics: {book}" in out
    assert (tmp_path / "grades" / "ben" / "feedback.html").is_file()
    assert "Score: 10 of 40" in _text((tmp_path / "grades" / "ben" / "feedback.html").read_text())


@pytest.mark.parametrize("junk", [{"tests": "nope"}, {"tests": [3, None]}, {"score": "NaN", "tests": []}, {}])
def test_malformed_results_still_give_a_page(junk):
    page = F.feedback_html(junk, "ana")
    assert "Score: 0 of 0" in _text(page)


def test_hand_graded_points_and_the_late_penalty_set_the_score_shown(tmp_path):
    """The gradebook adds scaleout.manual / late / final to results.json and a line to its output."""
    res = _results({"correct": 40, "traffic": 30, "random": 30})
    res["output"] += ("\n\nSubmitted 2026-12-07 01:59 UTC: 2 days after the deadline, a late penalty of 20% of "
                      "your points.")
    res["scaleout"].update({
        "manual": {"items": {"analysis <why>": {"score": 8, "max_score": 10}}, "score": 8, "max_score": 10,
                   "comments": "clear & short"},
        "final": {"auto": 100, "manual": 8, "late_points": 21.6, "score": 86.4, "max_score": 110}})
    text = _text(F.feedback_html(res, "ana"))
    assert "Score: 86.4 of 110 (autograded 100 + by hand 8 - late 21.6)" in text
    assert "a late penalty of 20% of your points" in text
    assert "Graded by hand item score analysis &lt;why&gt; 8 / 10" in text and "clear &amp; short" in text
    out = _batch(tmp_path, {"ana": res, "ben": _results({"correct": 40, "traffic": 30, "random": 30})})
    assert "2 submissions; mean score 93.2." in _text(F.gradebook_html(out))
