"""The solutions manual (issue 21): every exercise answered, every coding answer executed and asserted, and no
line of it in the student edition."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scaleoutai.errors import UserError
from scaleoutai.notebooks.release import release_course
from scaleoutai.notebooks.solutions import (
    check_manual, check_solutions, chapter_exercises, chapters_with_exercises, read_answers, release_solutions,
    solution_path,
)

REPO = Path(__file__).resolve().parents[1]
MANUALS = [solution_path(REPO, c) for c in chapters_with_exercises(REPO)]


def test_every_exercise_of_every_chapter_has_a_checked_solution():
    problems = check_solutions(REPO)
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])


def test_the_exercise_count_stops_at_the_heading_after_the_list():
    assert chapter_exercises(REPO / "chapters/appendix-b-cluster-lab/appendix-b-cluster-lab.py") == [1, 2, 3, 4, 5]
    assert chapter_exercises(REPO / "chapters/04-communication-primitives/04-communication-primitives.py") == list(range(1, 8))


CHAPTER = """# %% [markdown]
# # Toy
#
# ## 8. Exercises
#
# 1. **One.** Add two numbers.
# 2. **Two.** Why is the sum associative?
#
# ## 9. Research directions
"""
ARGUMENT = "Addition of real numbers is associative because " + "each grouping gives the same total " * 14


def _course(tmp_path: Path, manual: str) -> tuple[Path, Path]:
    chapter = tmp_path / "chapters/01-toy/01-toy.py"
    chapter.parent.mkdir(parents=True)
    chapter.write_text(CHAPTER)
    path = tmp_path / "solutions/01-toy/01-toy-solutions.py"
    path.parent.mkdir(parents=True)
    path.write_text(manual)
    return tmp_path, chapter


GOOD = f"""# %% [markdown]
# # Toy solutions
#
# ## Exercise 1 (coding): sum

# %%
total_of_two_numbers_in_this_manual = 2 + 3
assert total_of_two_numbers_in_this_manual == 5

# %% [markdown]
# ## Exercise 2 (conceptual): associativity
#
# {ARGUMENT}
"""


def test_a_complete_manual_passes_and_each_missing_piece_is_named(tmp_path):
    root, chapter = _course(tmp_path / "good", GOOD)
    assert check_manual(root, chapter, set()) == []
    assert [(a.number, a.kind) for a in read_answers(solution_path(root, chapter))] == [(1, "coding"), (2, "conceptual")]
    cases = {
        "no assert": (GOOD.replace("assert total", "print(total"), r"exercise 1 \(coding\): no code cell with an assert"),
        "missing": (GOOD.split("# %% [markdown]\n# ## Exercise 2")[0], r"answers \[1\], chapter has exercises \[1, 2\]"),
        "thin": (GOOD.replace(ARGUMENT, "Because it is."), r"exercise 2 \(conceptual\): 3 words"),
        "kind": (GOOD.replace("(conceptual)", "(essay)"), r"kind 'essay'"),
        "lab": (GOOD.replace("(conceptual)", "(lab)"), r"name the lab folder"),
    }
    for name, (text, expected) in cases.items():
        root, chapter = _course(tmp_path / name.replace(" ", "-"), text)
        problems = check_manual(root, chapter, set())
        assert len(problems) == 1 and __import__("re").search(expected, problems[0]), (name, problems)
    root, chapter = _course(tmp_path / "absent", GOOD)
    solution_path(root, chapter).unlink()
    assert "missing; write a solution for each of the 2 exercises" in check_manual(root, chapter, set())[0]


def test_a_solution_line_shared_with_the_edition_is_reported():
    chapter = REPO / "chapters/01-why-scale-out/01-why-scale-out.py"
    line = next(ln for ln in solution_path(REPO, chapter).read_text().splitlines()
                if len(ln.strip()) >= 40 and not ln.startswith(("#", "import", "from")))
    problems = check_manual(REPO, chapter, {line.strip()})
    assert problems and "line also in the student edition" in problems[-1]


def test_the_student_edition_refuses_a_pasted_solution(tmp_path):
    course = tmp_path / "course"
    for name in ("chapters", "solutions", "src", "labs", "grading", "capstone", "pyproject.toml", "Makefile"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy2)(REPO / name, course / name)
    release_course(course, tmp_path / "clean")  # the course as it is releases
    assert not (tmp_path / "clean" / "solutions").exists()
    chapter = course / "chapters/03-performance-models/03-performance-models.py"
    manual = solution_path(course, chapter).read_text().splitlines()
    pasted = next(ln for ln in manual if ln.startswith("# ") and len(ln) > 60 and "Exercise" not in ln)
    chapter.write_text(chapter.read_text() + "\n# %% [markdown]\n" + pasted + "\n")
    with pytest.raises(UserError, match=r"03-performance-models.py contains a solution from solutions/"):
        release_course(course, tmp_path / "leaky")
    assert not (tmp_path / "leaky").exists()


def test_release_solutions_writes_the_manual_and_refuses_a_folder_inside_the_course(tmp_path):
    out = release_solutions(REPO, tmp_path / "manual", pattern="01", html=True, timeout=120)
    assert (out / "01-why-scale-out-solutions.ipynb").is_file()
    html = (out / "01-why-scale-out-solutions.html").read_text()
    assert "Exercise 1" in html and "Traceback" not in html
    assert "| [01-why-scale-out](01-why-scale-out-solutions.ipynb) |" in (out / "README.md").read_text()
    with pytest.raises(UserError, match="inside the course's own sources"):
        release_solutions(REPO, REPO / "solutions" / "out")
    from scaleoutai.cli import main

    assert main(["release", "solutions", "--out", str(tmp_path / "all")]) == 0
    assert len(list((tmp_path / "all").glob("*-solutions.ipynb"))) == len(MANUALS)


@pytest.mark.notebooks
@pytest.mark.timeout(200)
@pytest.mark.parametrize("manual", MANUALS, ids=[p.parent.name for p in MANUALS])
def test_solution_manual_runs_and_its_asserts_hold(manual, tmp_path):
    """Each manual runs as a script in a temp folder (as a notebook would, top to bottom), asserts and all."""
    if not manual.is_file():
        pytest.fail(f"{manual.relative_to(REPO)} is missing")
    before = {p for p in manual.parent.rglob("*")}
    # SCALEOUT_SOLUTIONS_SPARK: Chapter 7's answer also checks its plan against Spark's (a start of 10-60 s)
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0", SCALEOUT_SOLUTIONS_SPARK="1")
    proc = subprocess.run([sys.executable, str(manual)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, f"{manual.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    assert {p for p in manual.parent.rglob("*")} == before, f"{manual.name} wrote into its folder"
