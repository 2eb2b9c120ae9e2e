"""Finding chapter notebook sources and reading their parameters cell (course tooling, all chapters).

A source is a jupytext ``py:percent`` file: a ``*.py`` file with a line starting with ``# %%`` under
``chapters/`` or ``capstone/``. Its one code cell tagged ``parameters`` holds the full lesson sizes, each
line optionally carrying the size CI runs at: ``N = 1_000_000  # smoke: 2_000``.
"""
from __future__ import annotations

import ast
import fnmatch
import io
import re
import tokenize
from pathlib import Path
from typing import Any

from ..errors import NotebookError

PARAMETERS_HEADER = '# %% tags=["parameters"]'
# folder -> glob: every chapter subfolder, but only capstone's top level (capstone/template/ is student code)
SOURCE_DIRS = {"chapters": "**/*.py", "capstone": "*.py"}
_SKIP_PARTS = {"_build", ".ipynb_checkpoints", "__pycache__"}
_HEADER_TAGS = re.compile(r"^# %%.*\btags\s*=\s*\[([^\]]*)\]")
_SMOKE = re.compile(r"#\s*smoke\b(?P<colon>\s*:)?(?P<value>.*)$")


def find_repo_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: cwd) holding a pyproject.toml; failing that, the
    course checkout this package runs from (an executed copy of a notebook may live in a temp folder)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    checkout = Path(__file__).resolve().parents[3]  # src/scaleoutai/notebooks/sources.py -> the checkout
    return checkout if (checkout / "pyproject.toml").is_file() else here


def is_notebook_source(path: Path, root: Path | None = None) -> bool:
    """True for a ``*.py`` py:percent file that is not a helper (``_name.py``) or a build artefact.

    Only the part of the path below ``root`` is checked for skipped folders (``_build``, checkpoints).
    """
    path = Path(path)
    parts = path.relative_to(root).parts if root is not None else path.parts
    if path.suffix != ".py" or path.name.startswith("_") or _SKIP_PARTS & set(parts):
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return any(line.startswith("# %%") for line in text.splitlines())


def notebook_name(source: Path) -> str:
    """The name a notebook goes by in listings, patterns and test ids: the file stem."""
    return Path(source).stem


def find_sources(root: Path | None = None, pattern: str | None = None) -> list[Path]:
    """Every notebook source under ``root``/chapters (any depth), then ``root``/capstone/*.py, by path.

    ``pattern`` is an existing path (a chapter folder or its source), or keeps the sources whose chapter
    folder name or stem contains it (plain text) or matches it (an fnmatch glob such as ``*communication*``). A pattern matching nothing is a NotebookError
    that lists the names there are.
    """
    root = find_repo_root() if root is None else Path(root)
    sources = [
        path
        for sub, files in SOURCE_DIRS.items()
        if (root / sub).is_dir()
        for path in sorted((root / sub).glob(files))
        if is_notebook_source(path, root)
    ]
    if pattern is None:
        return sources
    given = Path(pattern)
    if ("/" in pattern or pattern.endswith(".py")) and given.exists():  # a chapter named by its path
        real = given.resolve()
        chosen = [p for p in sources if real in (p.resolve(), p.parent.resolve())]
        if not chosen:
            raise NotebookError(f"{pattern} is not a chapter folder or notebook source under {root}/chapters")
        return chosen
    glob = any(ch in pattern for ch in "*?[")

    def matches(name: str) -> bool:
        return fnmatch.fnmatchcase(name, pattern) if glob else pattern in name

    chosen = [p for p in sources if matches(p.parent.name) or matches(p.stem)]
    if not chosen:
        names = ", ".join(notebook_name(p) for p in sources) or f"none under {root}/{{chapters,capstone}}"
        raise NotebookError(f"no notebook matches {pattern!r}; available: {names}")
    return chosen


def _parameters_cell(source: Path) -> tuple[int, list[str]]:
    """(line number of the header, lines of the cell) of the one cell tagged parameters."""
    lines = Path(source).read_text(encoding="utf-8").splitlines()
    headers = []
    for number, line in enumerate(lines, start=1):
        tags = _HEADER_TAGS.match(line)
        if tags and '"parameters"' in tags.group(1).replace("'", '"'):
            headers.append(number)
    if not headers:
        raise NotebookError(
            f"{source}: no parameters cell; add a code cell that starts with the line "
            f"{PARAMETERS_HEADER} and holds the sizes, e.g. 'N = 1_000_000  # smoke: 2_000'"
        )
    if len(headers) > 1:
        raise NotebookError(
            f"{source}: {len(headers)} cells tagged parameters (lines {', '.join(map(str, headers))}); "
            "keep exactly one"
        )
    start = headers[0]
    body = []
    for line in lines[start:]:
        if line.startswith("# %%"):
            break
        body.append(line)
    return start, body


def has_parameters_cell(source: Path) -> bool:
    """True when the source has exactly one cell tagged parameters."""
    try:
        _parameters_cell(source)
    except NotebookError:
        return False
    return True


def check_parameters_cell(source: Path) -> None:
    """Raise NotebookError (naming the header line to add) unless the source has a parameters cell."""
    _parameters_cell(source)


def _string_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_string_keys(v) for v in value)
    return True


def smoke_parameters(source: Path) -> dict[str, Any]:
    """{name: smoke value} from the ``# smoke: VALUE`` comments of the parameters cell.

    VALUE is a Python literal (number, string, tuple, list, dict with string keys, bool, None), read with
    ast.literal_eval; it replaces the lesson value when CI runs the notebook at smoke size.
    """
    source = Path(source)
    start, body = _parameters_cell(source)
    code = "\n".join(body) + "\n"
    try:
        tree = ast.parse(code)
        comments = {
            tok.start[0]: tok.string
            for tok in tokenize.generate_tokens(io.StringIO(code).readline)
            if tok.type == tokenize.COMMENT
        }
    except (SyntaxError, tokenize.TokenError) as exc:
        line = start + (getattr(exc, "lineno", None) or 1)
        why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise NotebookError(f"{source}:{line}: the parameters cell is not valid Python ({why})") from None
    smoke_lines: dict[int, str] = {}
    for cell_line, comment in comments.items():
        found = _SMOKE.search(comment)
        if not found:
            continue
        line = start + cell_line
        if not found.group("colon") or not found.group("value").strip():
            raise NotebookError(f"{source}:{line}: malformed smoke comment {comment!r}; write '# smoke: VALUE'")
        smoke_lines[cell_line] = found.group("value").strip()

    values: dict[str, Any] = {}
    for stmt in tree.body:
        span = range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)
        here = [n for n in span if n in smoke_lines]
        if not here:
            continue
        line = start + here[0]
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        else:
            targets = []
        if not targets or not all(isinstance(t, ast.Name) for t in targets):
            raise NotebookError(f"{source}:{line}: a smoke comment must follow an assignment 'NAME = VALUE'")
        text = smoke_lines[here[0]]
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise NotebookError(
                f"{source}:{line}: smoke value {text!r} is not a Python literal (number, string, tuple, list, dict, bool, None)"
            ) from None
        if not _string_keys(value):
            # papermill records the parameters in the notebook's JSON metadata, where keys are strings.
            raise NotebookError(f"{source}:{line}: smoke value {text!r} has a dict with non-string keys; use string keys")
        for target in targets:
            values[target.id] = value
        for n in here:
            del smoke_lines[n]
    if smoke_lines:
        line = start + min(smoke_lines)
        raise NotebookError(f"{source}:{line}: a smoke comment must follow an assignment 'NAME = VALUE'")
    return values
