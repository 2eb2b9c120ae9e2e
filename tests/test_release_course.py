"""The student edition holds the chapters, the released labs and the library, and nothing secret."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scaleoutai.cli import UserError, main
from scaleoutai.grading.labs import BEGIN, list_labs, strip_solutions
from scaleoutai.notebooks.release import release_course

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    return release_course(ROOT, tmp_path_factory.mktemp("e") / "edition")


def test_the_edition_holds_chapters_released_labs_and_the_library(edition):
    assert (edition / "chapters" / "04-communication-primitives" / "04-communication-primitives.py").is_file()
    assert (edition / "src" / "scaleoutai" / "collectives.py").is_file() and (edition / "pyproject.toml").is_file()
    for name in list_labs(ROOT):
        nb = json.loads((edition / "labs" / name / f"{name}.ipynb").read_text())
        assert "NotImplementedError" in json.dumps(nb) and (edition / "labs" / name / "public_tests.py").is_file()
    assert "make lab" in (edition / "README.md").read_text()
    assert (edition / "syllabi" / "distributed-ml.yaml").is_file()  # the index links the course paths


def test_the_edition_holds_no_hidden_test_and_no_solution(edition):
    assert not (edition / "grading").exists() and not (edition / "tests").exists()
    assert not list(edition.rglob("lab[0-9][0-9]-*.py")) and not list(edition.rglob("tests.py"))
    assert not list(edition.rglob("rubric.yaml")) and not list(edition.rglob("mutants"))
    for name in list_labs(ROOT):
        solution = {ln.strip() for ln in strip_solutions((ROOT / "labs" / name / f"{name}.py").read_text())[1]
                    if len(ln.strip()) >= 20 and not ln.strip().startswith("#")}
        nb = json.loads((edition / "labs" / name / f"{name}.ipynb").read_text())
        lines = {ln.strip() for c in nb["cells"] for ln in "".join(c["source"]).splitlines()}
        assert not solution & lines, name  # given code may share a line with an answer, not a whole line alone
        assert BEGIN not in json.dumps(nb)


def test_a_hidden_test_copied_into_a_chapter_is_refused_and_nothing_is_written(tmp_path):
    course = tmp_path / "course"
    for name in ("chapters", "labs", "grading", "src", "pyproject.toml"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, course / name)
    hidden = (course / "grading" / "lab04-ring-allreduce" / "tests.py").read_text().splitlines()
    line = next(ln for ln in hidden if len(ln.strip()) >= 60 and not ln.strip().startswith(("#", "from", "import")))
    chapter = course / "chapters" / "04-communication-primitives" / "04-communication-primitives.py"
    chapter.write_text(chapter.read_text() + "\n" + line + "\n")
    with pytest.raises(UserError, match="refusing to write the student edition"):
        release_course(course, tmp_path / "edition")
    assert not (tmp_path / "edition").exists() and not list(tmp_path.glob(".edition-*"))


def test_the_cli_writes_the_edition(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["release", "course", "--out", str(tmp_path / "ed")]) == 0
    assert "student edition written to" in capsys.readouterr().out and (tmp_path / "ed" / "labs").is_dir()


def test_make_lab_works_in_the_edition_its_workspace_holds_the_released_labs(edition, tmp_path):
    from scaleoutai.notebooks.workspace import build_workspace

    report = build_workspace(edition, tmp_path / "ws")
    nb = (tmp_path / "ws" / "labs" / "lab04-ring-allreduce" / "lab04-ring-allreduce.ipynb").read_text()
    assert "NotImplementedError" in nb and "index.ipynb" in report.written
    index = (tmp_path / "ws" / "index.ipynb").read_text()
    assert "notebooks list --path" in index and "chapters/41-capstone/41-capstone.ipynb" in index


def test_the_edition_published_through_git_keeps_every_lab_and_is_readable_by_everyone(edition, tmp_path):
    import stat
    import subprocess

    for folder in [edition, edition / "labs", *sorted((edition / "labs").iterdir())]:
        mode = folder.stat().st_mode
        assert mode & stat.S_IROTH and mode & stat.S_IXOTH, f"{folder} is not readable by other users"
    repo = tmp_path / "published"
    shutil.copytree(edition, repo)
    git = ["git", "-c", "user.name=instructor", "-c", "user.email=i@example.org", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "edition"]):
        subprocess.run([*git, *args], cwd=repo, check=True, timeout=60)
    clone = tmp_path / "clone"
    subprocess.run([*git, "clone", "-q", str(repo), str(clone)], check=True, timeout=60)
    for name in list_labs(ROOT):  # the course's .gitignore drops every .ipynb; the edition's must not
        assert (clone / "labs" / name / f"{name}.ipynb").is_file(), f"{name} was lost in the published repository"
    from scaleoutai.notebooks.workspace import build_workspace

    report = build_workspace(clone, tmp_path / "ws")  # what `make lab` serves, from the clone
    assert "index.ipynb" in report.written and "labs/lab25-sharded-topk-merge/lab25-sharded-topk-merge.ipynb" in report.written
    assert "git pull" in (clone / "README.md").read_text()
