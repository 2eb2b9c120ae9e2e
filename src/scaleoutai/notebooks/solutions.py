"""The solutions manual: a worked solution for every exercise of every chapter (issue 21, instructor edition).

A chapter ``chapters/F/F.py`` has its solutions in ``solutions/F/F-solutions.py`` (py:percent), a folder
the student edition never copies. Its exercises are the numbered items of section ``## 8. Exercises``; the
manual answers item N under a heading ``## Exercise N (kind): title`` with kind one of ``coding``,
``analysis``, ``conceptual`` or ``lab``. Coding and analysis answers carry a code cell with asserts (CI runs
every manual as a script); conceptual and lab answers give the argument in words. Every solution line of
``MIN_SECRET`` or more characters is a secret: the student edition is refused if it holds one
(``release.release_course``), the same leak test the labs get. ``scaleout release solutions`` writes the
manual as notebooks (or executed HTML).
"""
from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError

SOLUTIONS = "solutions"
KINDS = ("coding", "analysis", "conceptual", "lab")
MIN_SECRET = 40  # characters: shorter lines (names, calls) are shared with the chapters by nature
MIN_WORDS = 80  # a conceptual or lab answer argues; it does not only state
_ITEM = re.compile(r"^# (\d+)\. ")
_HEADING = re.compile(r"^##\s+Exercise\s+(\d+)\s*\((\w+)\)\s*:\s*(\S.*)$")
_LAB = re.compile(r"labs/(lab\d\d-[\w-]+)")


@dataclass
class Answer:
    """One exercise's answer in a manual: its heading and the cells up to the next heading."""

    number: int
    kind: str
    title: str
    words: int = 0
    text: list[str] = field(default_factory=list)  # its Markdown lines
    code: list[str] = field(default_factory=list)  # its code cells


def chapter_exercises(source: Path) -> list[int]:
    """The numbers of the exercises of section 8: top-level ``N.`` items until the next heading after them."""
    numbers: list[int] = []
    inside = False
    for line in Path(source).read_text(encoding="utf-8").splitlines():
        if line.startswith("# ## 8."):
            inside = True
        elif inside and line.startswith("# #") and numbers:
            break
        elif inside and (m := _ITEM.match(line)):
            numbers.append(int(m.group(1)))
    return numbers


def chapters_with_exercises(root: Path, pattern: str | None = None) -> list[Path]:
    """Chapter sources (``chapters/F/F.py``) with exercises, whose folder starts with ``pattern``."""
    sources = sorted(p for p in (Path(root) / "chapters").glob("*/*.py") if p.stem == p.parent.name)
    chosen = [p for p in sources if not pattern or p.parent.name.startswith(pattern.strip().rstrip("/"))]
    if pattern and not chosen:
        raise UserError(f"no chapter folder starts with {pattern!r}; try '07' or 'appendix-a'")
    return [p for p in chosen if chapter_exercises(p)]


def solution_path(root: Path, chapter: Path) -> Path:
    folder = Path(chapter).parent.name
    return Path(root) / SOLUTIONS / folder / f"{folder}-solutions.py"


def _cells(path: Path) -> list[tuple[str, str]]:
    import jupytext

    nb = jupytext.reads(Path(path).read_text(encoding="utf-8"), fmt="py:percent")
    return [(c.cell_type, c.source) for c in nb.cells]


def read_answers(path: Path) -> list[Answer]:
    """The answers of a manual in file order (the text before the first heading is its preamble)."""
    answers: list[Answer] = []
    for kind, text in _cells(path):
        if kind == "markdown":
            for line in text.splitlines():
                if m := _HEADING.match(line.strip()):
                    answers.append(Answer(int(m.group(1)), m.group(2), m.group(3).strip()))
                elif answers:
                    answers[-1].words += len(re.findall(r"[A-Za-z]{2,}", line))
                    answers[-1].text.append(line)
        elif kind == "code" and answers:
            answers[-1].code.append(text)
    return answers


def _asserts(code: list[str]) -> bool:
    return any(re.search(r"^\s*assert\b|np\.testing\.assert_|torch\.testing\.assert_", c, re.M) for c in code)


def check_manual(root: Path, chapter: Path, edition: set[str] | None = None) -> list[str]:
    """Problems of one chapter's manual, one line each; ``edition``: stripped lines of the student edition."""
    root, path = Path(root), solution_path(root, chapter)
    where = path.relative_to(root)
    if not path.is_file():
        return [f"{where}: missing; write a solution for each of the {len(chapter_exercises(chapter))} exercises"]
    expected, answers = chapter_exercises(chapter), read_answers(path)
    problems = []
    if [a.number for a in answers] != expected:
        problems.append(f"{where}: answers {[a.number for a in answers]}, chapter has exercises {expected}: "
                        f"one '## Exercise N (kind): title' heading each, in order")
    for a in answers:
        label = f"{where} exercise {a.number}"
        if a.kind not in KINDS:
            problems.append(f"{label}: kind {a.kind!r}; use one of {', '.join(KINDS)}")
        elif a.kind in ("coding", "analysis") and not _asserts(a.code):
            problems.append(f"{label} ({a.kind}): no code cell with an assert that checks the answer")
        elif a.kind in ("conceptual", "lab") and a.words < MIN_WORDS:
            problems.append(f"{label} ({a.kind}): {a.words} words; give the argument (at least {MIN_WORDS})")
        if a.kind == "lab":
            lab = _LAB.search(" ".join(a.text))
            if not lab or not (root / "labs" / lab.group(1)).is_dir():
                problems.append(f"{label} (lab): name the lab folder labs/labNN-slug that exists")
    shared = sorted(secret_lines(path) & edition) if edition is not None else []
    problems += [f"{where}: line also in the student edition (rephrase it): {s[:70]!r}" for s in shared[:5]]
    return problems


def secret_lines(path: Path) -> set[str]:
    """The manual's lines no student edition may hold: ``MIN_SECRET``+ characters, code comments and imports
    exempt; a Markdown line counts both bare and as the ``# text`` a py:percent chapter would hold."""
    secret: set[str] = set()
    for kind, text in _cells(path):
        for line in (s.strip() for s in text.splitlines()):
            if len(line) < MIN_SECRET:
                continue
            if kind == "markdown":
                secret |= {line, f"# {line}"}
            elif not line.startswith(("#", "import ", "from ")):
                secret.add(line)
    return secret


def all_secret_lines(root: Path) -> set[str]:
    return set().union(*(secret_lines(p) for p in sorted((Path(root) / SOLUTIONS).glob("*/*-solutions.py"))))


def edition_lines(root: Path) -> set[str]:
    """Stripped lines of what the student edition is made of (chapters, library, capstone, labs, examples)."""
    from .release import COPIED, _text_files

    lines: set[str] = set()
    for name in (*COPIED, "labs"):
        base = Path(root) / name
        for f in _text_files(base) if base.is_dir() else [base] if base.is_file() else []:
            if "__pycache__" not in f.parts:
                lines |= {ln.strip() for ln in f.read_text(errors="replace").splitlines()}
    return lines


def check_solutions(root: Path, pattern: str | None = None) -> list[str]:
    """Every problem of every matching chapter's manual (an empty list: the manual is complete)."""
    edition = edition_lines(root)
    return [p for chapter in chapters_with_exercises(root, pattern) for p in check_manual(root, chapter, edition)]


def release_solutions(root: Path, out: Path, pattern: str | None = None, html: bool = False,
                      timeout: float = 300.0) -> Path:
    """Write the instructor's manual to ``out`` (replaced whole): one notebook per chapter and a README index;
    ``html`` also executes each and renders ``F-solutions.html``. UserError if a manual is incomplete."""
    import jupytext

    from .execute import KERNELSPEC

    from .release import replace_folder

    root = Path(root).resolve()
    problems = check_solutions(root, pattern)
    if problems:
        raise UserError(f"the manual is incomplete ({len(problems)} problem(s)); first: {problems[0]}")
    rows = ["# Scaling Out AI: the solutions manual", "", "Instructors only: never give this folder to students.",
            "", "| chapter | exercises | coding | analysis | conceptual | lab |", "|---|---:|---:|---:|---:|---:|"]
    with replace_folder(out, root, ("chapters", SOLUTIONS, "src", "labs")) as tmp:
        chapters = chapters_with_exercises(root, pattern)
        if html:  # executing every manual takes minutes: show which chapter runs
            from tqdm.auto import tqdm

            chapters = tqdm(chapters, desc="solutions: executing", unit="ch", file=sys.stderr)
        for chapter in chapters:
            if html:
                chapters.set_postfix_str(chapter.parent.name)
            source = solution_path(root, chapter)
            nb = jupytext.reads(source.read_text(encoding="utf-8"), fmt="py:percent")
            nb.metadata["kernelspec"] = dict(KERNELSPEC)
            dest = tmp / f"{source.stem}.ipynb"
            jupytext.write(nb, dest, fmt="ipynb")
            if html:
                _render_html(source, dest, timeout)
            kinds = [a.kind for a in read_answers(source)]
            rows.append(f"| [{chapter.parent.name}]({dest.name}) | {len(kinds)} | "
                        + " | ".join(str(kinds.count(k)) for k in KINDS) + " |")
        (tmp / "README.md").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return Path(out).resolve()


def _render_html(source: Path, notebook: Path, timeout: float) -> Path:
    """Execute ``source`` into ``notebook`` (in a temp working folder, in a child process that Ctrl-C and
    the time limit take down whole) and write its HTML beside it."""
    import nbformat
    from nbconvert import HTMLExporter

    from .execute import run_one

    with tempfile.TemporaryDirectory(prefix="solutions-run-") as cwd:
        record = run_one(source, notebook, {}, timeout, cwd=Path(cwd))
    if record.status != "ok":
        raise UserError(f"{source.stem}: the manual did not run to the end ({record.status}): {record.error}")
    nb = nbformat.read(str(notebook), as_version=4)
    body, _ = HTMLExporter().from_notebook_node(nb)
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html


def main(argv: list[str] | None = None) -> int:
    """``python -m scaleoutai.notebooks.solutions check [PREFIX]``: print each problem, exit 1 if any."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "check" or len(args) > 2:
        print("usage: python -m scaleoutai.notebooks.solutions check [CHAPTER-PREFIX]", file=sys.stderr)
        return 2
    from .sources import find_repo_root

    root = find_repo_root()
    try:
        problems = check_solutions(root, args[1] if len(args) > 1 else None)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(problems) if problems else "every exercise has a solution; no line shared with the edition")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
