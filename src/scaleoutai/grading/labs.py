"""Labs: discovery, solution markers, the student release, and reading a submitted notebook.

A lab is ``labs/labNN-slug/labNN-slug.py`` (jupytext py:percent) with answers between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` and ``public_tests.py`` beside it; its hidden tests
and rubric are ``grading/labNN-slug/``. ``assign`` replaces each solution block with a stub that
raises NotImplementedError and refuses to write a release that still holds solution or grading text.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
PUBLIC_TAG = "public-tests"
# A lab's "try it" cell: it runs the student's functions on an example for the student to read, so the
# grader skips it (every rank sandbox would run it again at each start, and the hidden tests test the same
# functions); like otter's ignored cells. Only the lab's own example cells carry it.
DEMO_TAG = "demo"
NOTEBOOK_CAP = 20 * 1024 * 1024
STUB = 'raise NotImplementedError("write your solution here, then run the public tests")'


def _user_error(msg: str) -> Exception:
    return UserError(msg)


def course_root() -> Path:
    """The folder holding ``labs/``: $SCALEOUT_ROOT, else the nearest parent of cwd, else the checkout."""
    env = os.environ.get("SCALEOUT_ROOT")
    if env:
        return Path(env).resolve()
    for d in [Path.cwd(), *Path.cwd().parents]:
        if (d / "labs").is_dir():
            return d
    return Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Lab:
    name: str  # labNN-slug
    source: Path  # the solution source (py:percent)
    public_tests: Path
    grading: Path  # grading/labNN-slug: tests.py, rubric.yaml

    @property
    def folder(self) -> Path:
        return self.source.parent


def list_labs(root: Path | None = None) -> list[str]:
    root = root or course_root()
    return sorted(p.name for p in (root / "labs").glob("lab[0-9][0-9]-*") if p.is_dir())


def find_lab(name: str, root: Path | None = None) -> Lab:
    """Resolve "lab04", "04" or "lab04-ring-allreduce" to a Lab; a UserError lists the labs there are."""
    root = root or course_root()
    names = list_labs(root)
    key = name.strip().rstrip("/").split("/")[-1]
    if key.isdigit():
        key = f"lab{int(key):02d}"
    hits = [n for n in names if n == key or n.split("-", 1)[0] == key]
    if len(hits) != 1:
        raise _user_error(f"no lab named {name!r} under {root / 'labs'}; choose one of {names or 'none'}")
    folder = root / "labs" / hits[0]
    return Lab(hits[0], folder / f"{hits[0]}.py", folder / "public_tests.py", root / "grading" / hits[0])


def strip_solutions(text: str) -> tuple[str, list[str]]:
    """Replace every BEGIN..END SOLUTION block by a stub at the marker's indent; return (text, removed)."""
    out: list[str] = []
    removed: list[str] = []
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(BEGIN):
            if inside:
                raise _user_error(f"line {n}: {BEGIN} inside another solution block; close the first with {END}")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif line.strip().startswith(END):
            if not inside:
                raise _user_error(f"line {n}: {END} without a {BEGIN} before it")
            inside = False
        elif inside:
            removed.append(line)
        else:
            out.append(line)
    if inside:
        raise _user_error(f"a {BEGIN} block is never closed; add {END}")
    return "\n".join(out) + "\n", removed


def secret_lines(removed: list[str], grading: Path, min_len: int = 20) -> set[str]:
    """Lines no release may hold: solution lines and the lines of hidden tests and rubrics (not the
    mutants, which share signatures with every answer), ``min_len``+ characters, not comments."""
    secret = [ln.strip() for ln in removed]
    for f in sorted(grading.rglob("*")) if grading.is_dir() else []:
        if f.is_file() and f.suffix in (".py", ".yaml") and "mutants" not in f.relative_to(grading).parts:
            secret += [ln.strip() for ln in f.read_text(errors="replace").splitlines()]
    return {s for s in secret if len(s) >= min_len and not s.startswith(("#", "import ", "from "))}


def leaks(release: str, secrets: set[str]) -> list[str]:
    """What of ``secrets`` (see ``secret_lines``) the release text holds, and any solution marker."""
    found = ["a solution marker"] if BEGIN in release or END in release else []
    body = {ln.strip() for ln in release.splitlines()}
    return found + [repr(s[:60]) for s in sorted(secrets & body)]


def assign(lab: Lab, out: Path) -> Path:
    """Write the student release ``out/<lab>/``: the notebook with stubs and the public tests."""
    import jupytext

    if not lab.source.is_file():
        raise _user_error(f"{lab.source} is missing: a lab needs its solution source")
    text, removed = strip_solutions(lab.source.read_text())
    if not removed:
        raise _user_error(f"{lab.source} has no {BEGIN} ... {END} block: nothing for students to write")
    public = lab.public_tests.read_text() if lab.public_tests.is_file() else ""
    found = leaks(text + "\n" + public, secret_lines(removed, lab.grading))
    if found:
        raise _user_error(f"refusing to write the release of {lab.name}: it still contains {', '.join(found[:3])}; "
                          f"move that text inside a solution block or out of grading/")
    from scaleoutai.notebooks.execute import KERNELSPEC, language_info

    nb = jupytext.reads(text, fmt="py:percent")
    nb.metadata["kernelspec"] = dict(KERNELSPEC)  # opens with a Python kernel, no kernel picker
    nb.metadata["language_info"] = language_info()  # in full, so opening it does not mark it modified
    dest = out / lab.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{lab.name}-", dir=out if out.is_dir() else None))
    try:
        jupytext.write(nb, tmp / f"{lab.name}.ipynb", fmt="ipynb")
        if public:
            shutil.copy(lab.public_tests, tmp / "public_tests.py")
        if dest.exists():
            shutil.rmtree(dest)
        out.mkdir(parents=True, exist_ok=True)
        from scaleoutai.notebooks.release import open_to_readers

        open_to_readers(tmp)  # mkdtemp's 700 would hide the release from students on a shared file system
        shutil.move(str(tmp), dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


_MAGIC = re.compile(r"^(\s*)([%!].*)$")


def read_cells(path: Path) -> list[dict]:
    """Code cells of a submitted .ipynb as [{source, skip}]; IPython magics become comments.

    Cells tagged ``public-tests`` are skipped: the grader runs its own tests. Raises ValueError with a
    readable reason for anything that is not a notebook.
    """
    try:
        size = os.lstat(path).st_size
        if not path.is_file() or path.is_symlink():
            raise ValueError(f"{path.name} is not a regular file")
        if size > NOTEBOOK_CAP:
            raise ValueError(f"the notebook is {size >> 20} MB; clear its outputs (limit {NOTEBOOK_CAP >> 20} MB)")
        text = path.read_bytes().decode("utf-8", errors="replace")
        if path.suffix == ".py":  # a jupytext (py:percent) solution, as the course's own sources are
            import jupytext

            nb = json.loads(jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="ipynb"))
        else:
            nb = json.loads(text)
    except (OSError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{path.name} is not a readable notebook ({type(exc).__name__}: {str(exc)[:120]}); "
                         f"submit the .ipynb saved by Jupyter (or a py:percent .py)") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{path.name} is not a Jupyter notebook (no list of cells); submit the .ipynb file")
    cells = []
    for c in nb["cells"]:
        if not isinstance(c, dict) or c.get("cell_type") != "code":
            continue
        src = c.get("source", "")
        src = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else str(src)
        src = "\n".join(_MAGIC.sub(r"\1pass  # \2", ln) for ln in src.splitlines())
        meta = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
        cells.append({"source": src, "skip": PUBLIC_TAG in tags or DEMO_TAG in tags})
    return cells


def cells_source(cells: list[dict]) -> str:
    """All code the grader will run, for static checks (AST)."""
    return "\n\n".join(c["source"] for c in cells if not c["skip"])


def solution_notebook(lab: Lab, dest: Path, source: str | None = None) -> Path:
    """The reference solution (or ``source``, an edited copy of it) as a notebook, markers removed."""
    import jupytext

    text = source if source is not None else lab.source.read_text()
    text = "\n".join(ln for ln in text.splitlines() if ln.strip() not in (BEGIN, END))
    jupytext.write(jupytext.reads(text, fmt="py:percent"), dest, fmt="ipynb")
    return dest
