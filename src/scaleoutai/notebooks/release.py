"""The student edition: what students get, built from the course repository (``scaleout release course``).

It holds the chapter sources, every lab as ``scaleout assign`` releases it (the notebook with stubs and
its public tests), the library with what installs it, the capstone starter and the examples. It never
holds ``grading/`` (hidden tests, mutants, rubrics), the lab solution sources, ``solutions/`` (the manual: any
line of it in the edition is refused as a leak), the course's own test
suite or its git history. Each lab is released by ``assign``, which refuses one that holds a line of its
solution or hidden tests (20+ characters); the edition as a whole is refused if any file holds a
hidden-test line of 60+ characters (a copied test) or a solution marker. Chapters and the library may
repeat short lines of an answer: they teach the same algorithms. Written to a temporary folder
beside the destination and renamed, so nothing is half-written.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UserError

# what the edition copies from the course, as it is; labs/ are released, never copied
COPIED = ("chapters", "syllabi", "src/scaleoutai", "capstone", "examples", "environments", "docker/Dockerfile.student",
          "pyproject.toml", "Makefile", ".dockerignore")
# The edition's own .gitignore (the course's ignores every .ipynb, which would drop the released labs when an
# instructor publishes the edition as a git repository): what a student's machine makes, nothing shipped.
STUDENT_GITIGNORE = """.venv/
__pycache__/
*.pyc
*.egg-info/
.ipynb_checkpoints/
.pytest_cache/
_build/
workspace/
mlflow.db
mlruns/
"""
SKIPPED = ("__pycache__", ".ipynb_checkpoints", "_build", ".pytest_cache", "*.egg-info", "*.pyc", "*.ipynb")
TEXT = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".json", ".ipynb", ".sh", ".cfg", "Makefile", "Dockerfile")

STUDENT_README = """# Scaling Out AI: the student edition

Your instructor published this folder for you: the chapter notebooks, the labs you hand in, and the
library every notebook imports. Solutions and the grader's tests are not here.

```bash
make lab       # first time: creates .venv and installs the course (about a minute), then opens JupyterLab
make install   # only install
```

- **Chapters** (`chapters/`): read and run them in order within a part; Part I (chapters 1-5) comes first.
- **Labs** (`labs/labNN-slug/labNN-slug.ipynb`): write your code where a cell raises
  `NotImplementedError`, run the public tests in the last cell, then hand in the `.ipynb` as your
  instructor asks. The grader runs more, hidden tests, on more world sizes and data types.
- **Capstone** (`capstone/`): the template project, six starter options (`capstone/options/`), the rubric
  and the report template.
- **The `scaleout` command** is in `.venv/bin`: run `source .venv/bin/activate` once per terminal (or call
  `.venv/bin/scaleout`).

**When your instructor publishes a new version** (this folder is a git repository you cloned): `git pull`,
then `make lab`. Your work lives in `workspace/`, which git does not track: a chapter or lab you never
edited is replaced by the new version; one you edited is kept, and the new version is written beside it as
`NAME.updated.ipynb`.
"""


def _ignore(folder: str, names: list[str]) -> set[str]:
    import fnmatch

    return {n for n in names if any(fnmatch.fnmatch(n, pattern) for pattern in SKIPPED)}


def _text_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and (p.suffix in TEXT or p.name in TEXT))


def open_to_readers(folder: Path) -> None:
    """Give a folder made by ``tempfile.mkdtemp`` (mode 700) the mode any new folder gets under the umask
    (755 under the usual 022), so students on a shared file system can read what was published."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)


@contextmanager
def replace_folder(out: Path, course: Path, protected: tuple[str, ...]) -> Iterator[Path]:
    """A temp folder beside ``out`` that replaces ``out`` whole when the block ends without an error (and is
    removed when it raises), so nothing is half-written. Refuses an ``out`` that is ``course`` itself or
    lies inside one of its ``protected`` folders."""
    course, out = Path(course).resolve(), Path(out).resolve()
    if course == out or course in out.parents and out.parts[len(course.parts)] in protected:
        raise UserError(f"--out {out} is inside the course's own sources; choose another folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        yield tmp
        open_to_readers(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def answer_lines(course: Path) -> tuple[set[str], set[str]]:
    """What nothing students see may hold: hidden-test lines of 60+ characters (a copied test) and the
    lines of the solutions manual (issue 21). The student edition and the website both check against it."""
    from scaleoutai.grading.labs import secret_lines

    from .solutions import all_secret_lines

    return secret_lines([], Path(course) / "grading", 60), all_secret_lines(course)


def answers_in(text: str, hidden: set[str], manual: set[str]) -> list[str]:
    """The answers ``text`` holds (see ``answer_lines``), and any solution marker; [] when none."""
    from scaleoutai.grading.labs import leaks

    lines = {ln.strip() for ln in text.splitlines()}
    return leaks(text, hidden) + [f"a solution from solutions/: {s[:60]!r}" for s in sorted(manual & lines)]


def release_course(course: Path, out: Path) -> Path:
    """Write the student edition of ``course`` to ``out`` (replaced whole); UserError on a leak."""
    from scaleoutai.grading.labs import _user_error, assign, find_lab, list_labs

    course, out = Path(course).resolve(), Path(out).resolve()
    with replace_folder(out, course, ("labs", "grading", "src", "solutions")) as tmp:
        for name in COPIED:
            src = course / name
            if src.is_dir():
                shutil.copytree(src, tmp / name, ignore=_ignore)
            elif src.is_file():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, tmp / name)
        (tmp / "README.md").write_text(STUDENT_README)
        (tmp / ".gitignore").write_text(STUDENT_GITIGNORE)
        for name in list_labs(course):  # each lab checked against its own answers, as assign does
            assign(find_lab(name, course), tmp / "labs")
        hidden, manual = answer_lines(course)
        for path in _text_files(tmp):
            found = answers_in(path.read_text(errors="replace"), hidden, manual)
            if path.relative_to(tmp).parts[0] == "src":  # the grader's own code names the markers
                found = [f for f in found if f != "a solution marker"]
            if found:
                raise _user_error(f"refusing to write the student edition: {path.relative_to(tmp)} contains "
                                  f"{', '.join(found[:3])}; move that text inside a solution block or out of grading/")
    return out
