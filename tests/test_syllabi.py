"""The five course paths (preface, Section 0.5): the real syllabi pass their checks and follow the preface
(Table 0.2 exactly for Big Data Algorithms for AI), each kind of mistake is caught on a small broken
copy, `scaleout notebooks list --path` prints a path week by week, and the course index links them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scaleoutai.notebooks.syllabi import ORDER, check_path, find_path, format_path, load_path, load_paths
from scaleoutai.notebooks.workspace import _course_paths, _index, _titles

REPO = Path(__file__).resolve().parents[1]
PATHS = {p.name: p for p in load_paths(REPO)}


def test_the_five_paths_exist_in_the_preface_order_and_pass_their_checks():
    assert list(PATHS) == list(ORDER)
    for path in PATHS.values():
        assert check_path(path, REPO) == [], path.name


def test_big_data_algorithms_follows_table_0_2_exactly():
    weeks = PATHS["big-data-algorithms"].weeks
    table = {(1, 2): {1, 2, 3}, (3,): {4, 5}, (4, 5, 6, 7): {6, 7, 8, 9}, (8, 9): {12, 13}, (10, 11): {25},
             (12,): {36}, (13, 14, 15): {41}}
    assert [w.week for w in weeks] == list(range(1, 16))
    for rows, chapters in table.items():
        assert {c for w in weeks if w.week in rows for c in (*w.chapters, *w.planned)} == chapters, rows
    assert weeks[11].chapters == (36,) and weeks[11].planned == ()  # the case study exists now


@pytest.mark.parametrize("name, focus, planned", [
    ("distributed-ml", set(range(10, 22)) | {38}, set()),
    ("parallel-deep-learning", set(range(15, 27)), set()),
    ("multi-agent-systems", set(range(27, 33)) | {20, 39}, set()),
    ("ai-infrastructure", {8, 9, 18, 23, 24, 25, 26, 33, 34, 35}, set()),
])
def test_each_path_covers_the_chapters_the_preface_gives_it_after_part_one(name, focus, planned):
    path = PATHS[name]
    chapters = set(path.chapters())
    assert chapters - set(range(1, 6)) - {41} == focus
    assert set(range(1, 6)) <= chapters  # the shared Part I trunk
    assert {c for w in path.weeks for c in w.planned} == planned
    assert path.weeks[-1].chapters == (41,) and path.weeks[-1].capstone


def test_every_lab_is_some_week_s_lab_in_a_course_path():
    labs = {p.name for p in (REPO / "labs").iterdir() if p.is_dir() and p.name.startswith("lab")}
    assigned = {w.lab for path in PATHS.values() for w in path.weeks if w.lab}
    assert labs - assigned == set()


# ---------------------------------------------------------------- each mistake on a small broken copy


def small_course(tmp_path: Path, **changes) -> Path:
    """Chapters 1, 2 and 41, lab01, and a valid 13-week path 'p'; ``changes`` replace weeks by number."""
    for folder in ("01-why", "02-concepts", "41-capstone"):
        (tmp_path / "chapters" / folder).mkdir(parents=True)
    (tmp_path / "chapters" / "01-why" / "01-why.py").write_text("# %% [markdown]\n# # Chapter 1. Why scale out\n")
    (tmp_path / "labs" / "lab01-x").mkdir(parents=True)
    weeks = [{"week": 1, "chapters": [1], "lab": "lab01-x", "reading": "start"}]
    weeks += [{"week": n, "chapters": [2]} for n in range(2, 11)]
    weeks += [{"week": n, "chapters": [41], "capstone": True} for n in range(11, 14)]
    for key, week in changes.items():
        weeks[int(key[1:]) - 1] = week
    (tmp_path / "syllabi").mkdir()
    doc = {"name": "p", "title": "A path", "focus": "testing", "weeks": [w for w in weeks if w is not None]}
    (tmp_path / "syllabi" / "p.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_the_small_copy_is_clean_and_formats_week_by_week(tmp_path):
    root = small_course(tmp_path, w2={"week": 2, "chapters": [2], "planned_chapters": [37]})
    path = find_path("p", root)
    assert check_path(path, root) == []
    text = format_path(path, root).splitlines()
    assert text[0] == "A path (p): 13 weeks"
    assert text[3].startswith("week  1") and text[3].endswith("Chapter 1. Why scale out")
    assert "lab: lab01-x" in text[4] and "Chapter 37 (planned, not written yet)" in "\n".join(text)


@pytest.mark.parametrize("changes, message", [
    ({"w3": {"week": 4, "chapters": [2]}}, "weeks must be numbered 1..13 in order"),
    ({"w13": None}, "12 weeks; a semester path has 13 to 15"),
    ({"w1": {"week": 1, "chapters": [41], "capstone": True}}, "week 1 must start in Part I"),
    ({"w13": {"week": 13, "chapters": [2]}}, "the last week must be a capstone week on Chapter 41"),
    ({"w4": {"week": 4, "chapters": [7]}}, "week 4: chapter 7 does not exist (no chapters/07-* folder)"),
    ({"w4": {"week": 4, "chapters": [38]}}, "week 4: chapter 38 does not exist (no chapters/38-* folder); "
                                            "list it under planned_chapters"),
    ({"w4": {"week": 4, "chapters": [2], "planned_chapters": [12]}}, "week 4: planned_chapters is only for chapters 36-40"),
    ({"w4": {"week": 4, "chapters": [2], "lab": "lab99-nothing"}}, "week 4: lab 'lab99-nothing' does not exist"),
    ({"w4": {"week": 4, "chapters": [2], "capstone": True}}, "week 4: 'capstone: true' goes with Chapter 41"),
    ({"w4": {"week": 4, "chapters": []}}, "week 4 lists no chapter"),
])
def test_each_mistake_is_one_clear_line(tmp_path, changes, message):
    root = small_course(tmp_path, **changes)
    problems = check_path(find_path("p", root), root)
    assert len(problems) == 1 and message in problems[0] and problems[0].startswith("p.yaml: "), problems


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(name="q"), "'name: q' must equal the file name 'p'"),
    (lambda d: d["weeks"][0].update(chapters="1, 2"), "'chapters' must be a list of chapter numbers"),
    (lambda d: d["weeks"][0].update(room="B12"), "unknown field(s) ['room']"),
    (lambda d: d.pop("title"), "'title' must be a non-empty string"),
])
def test_a_malformed_path_file_is_one_value_error(tmp_path, edit, message):
    root = small_course(tmp_path)
    file = root / "syllabi" / "p.yaml"
    doc = yaml.safe_load(file.read_text())
    edit(doc)
    file.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError) as info:
        load_path(file)
    assert message in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- the command and the course index


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scaleoutai.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def test_notebooks_list_path_prints_the_weeks_in_order_with_titles_and_labs():
    done = cli("notebooks", "list", "--path", "distributed-ml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Distributed Machine Learning (distributed-ml): 15 weeks"
    weeks = [int(ln.split()[1]) for ln in lines if ln.startswith("week ")]
    assert weeks == list(range(1, 16))
    text = done.stdout
    assert "Chapter 15. Data parallelism" in text and "lab: lab15-bucketed-ddp" in text
    assert text.index("Chapter 10. Distributed optimization") < text.index("Chapter 19. Foundation-model training")
    assert "week 15 [capstone]" in text


def test_notebooks_list_with_an_unknown_path_is_one_line_listing_the_choices():
    done = cli("notebooks", "list", "--path", "deep-learning")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "unknown course path 'deep-learning'; choose one of: " in done.stderr
    assert all(name in done.stderr for name in ORDER)


def test_the_course_index_links_each_path_chapters_in_syllabus_order():
    chapters = sorted(p.name for p in (REPO / "chapters").iterdir() if p.is_dir() and p.name[:2].isdigit())
    nb = json.loads(_index(chapters, [], _course_paths(REPO), _titles(REPO, [])))
    text = "".join(nb["cells"][0]["source"])
    section = text[text.index("## Course paths"):]
    line = next(ln for ln in section.splitlines() if ln.startswith("- **Big Data Algorithms for AI**"))
    # by number, with the chapter's title as the link's tooltip
    assert '[6](chapters/06-mapreduce/06-mapreduce.ipynb "Chapter 6. MapReduce")' in line
    assert line.index("[25]") < line.index("[41]")
    assert line.index("[25]") < line.index("[36](chapters/36-web-scale-text-and-rag/") < line.index("[41]")
    assert "planned" not in section  # every chapter a path names exists
    assert sum(ln.startswith("- **") for ln in section.splitlines()) == 5


def test_a_written_chapter_left_under_planned_chapters_is_one_clear_line(tmp_path):
    root = small_course(tmp_path, w4={"week": 4, "chapters": [2], "planned_chapters": [37]})
    assert check_path(find_path("p", root), root) == []  # not written yet: fine
    (root / "chapters" / "37-federated").mkdir()
    problems = check_path(find_path("p", root), root)
    assert problems == ["p.yaml: week 4: chapter 37 exists now (chapters/37-*): move it from planned_chapters to chapters"]
