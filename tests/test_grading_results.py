"""Result files: the Gradescope schema, atomic writes, hostile outputs, the gradebook."""
from __future__ import annotations

import csv
import json
import os

import numpy as np

from scaleoutai.grading import results as R


def test_atomic_write_leaves_no_temp_file_and_replaces_whole(tmp_path):
    path = tmp_path / "a" / "results.json"
    R.atomic_write(path, "one")
    R.atomic_write(path, "two")
    assert path.read_text() == "two" and os.listdir(path.parent) == ["results.json"]


def test_results_follow_the_gradescope_schema():
    tests = [R.test_entry("a", 2, 4, "half"), R.test_entry("b", 3, 3, "")]
    res = R.make_results(tests, "out", 1.5)
    assert res["score"] == 5 and res["max_score"] == 7
    assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(res["tests"][0])
    assert [t["status"] for t in res["tests"]] == ["failed", "passed"]


def test_load_npz_refuses_pickles_links_and_giants(tmp_path):
    np.savez(tmp_path / "ok.npz", a=np.arange(3))
    assert R.load_npz(tmp_path / "ok.npz")["a"].tolist() == [0, 1, 2]
    np.savez(tmp_path / "obj.npz", a=np.array([{"x": 1}], dtype=object))
    assert R.load_npz(tmp_path / "obj.npz") is None
    os.symlink(tmp_path / "ok.npz", tmp_path / "link.npz")
    assert R.load_npz(tmp_path / "link.npz") is None
    assert R.load_npz(tmp_path / "ok.npz", cap=10) is None
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04garbage")
    assert R.load_npz(tmp_path / "junk.npz") is None


def test_load_json_returns_none_for_anything_malformed(tmp_path):
    (tmp_path / "a.json").write_text("[" * 100000)
    (tmp_path / "b.json").write_text('{"ok": true}')
    assert R.load_json(tmp_path / "a.json") is None and R.load_json(tmp_path / "b.json") == {"ok": True}
    assert R.load_json(tmp_path / "missing.json") is None


def test_gradebook_is_rebuilt_from_result_files_one_row_each(tmp_path):
    for name, score in (("bob", 3), ("amy", 5)):
        R.write_results(tmp_path / name / "results.json",
                        R.make_results([R.test_entry("t1", score, 5, "")], "", 0, {"status": "ok"}))
    (tmp_path / "half" / "results.json.tmp").parent.mkdir()
    R.rebuild_gradebook(tmp_path)
    R.rebuild_gradebook(tmp_path)
    rows = list(csv.DictReader((tmp_path / "gradebook.csv").open()))
    assert [(r["submission"], r["score"], r["t1"]) for r in rows] == [("amy", "5.0", "5.0"), ("bob", "3.0", "3.0")]
    assert json.loads((tmp_path / "amy" / "results.json").read_text())["max_score"] == 5
