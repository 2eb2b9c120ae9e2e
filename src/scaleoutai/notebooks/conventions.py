"""The chapter conventions (CHAPTERS.md, "chapter structure"), checked on a py:percent source.

Every problem is one line ``file:line: what is wrong; what to do``. ``check_chapter`` is the structure:
a prerequisites line under the title, sections 1-8, 9 Research directions (open problems with dated
references and no links), What's next, Section 4 showing its code with ``show(...)``, no control
characters in markdown, no production cell that swallows its own failure, no typed prices.
The notation lint lives in ``notation``.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

_CELL = re.compile(r"^# %%(?P<rest>.*)$")
_H2 = re.compile(r"^# ## (?P<title>.+)$")
_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")
_URL = re.compile(r"https?://|www\.|doi\.org|arxiv\.org/", re.I)
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
_SWALLOWED = {"Exception", "BaseException", "ImportError", "ModuleNotFoundError", "RuntimeError", "OSError"}
_PRICE_PROSE = re.compile(r"(?<![\\\w])\\?\$\s?\d[\d,.]*\s*(?:/|per)\s*(?:GPU[- ]?)?(?:hour|hr|h)\b|\bUSD\s?\d|\d\s?USD\b", re.I)
_PRICE_CODE = re.compile(r"\b\w*price\w*\s*=\s*\d", re.I)


@dataclass
class Cell:
    kind: str  # "markdown" or "code"
    line: int  # 1-based line of the "# %%" header
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def markdown(self) -> list[tuple[int, str]]:
        """(line number, text without the leading "# ") of a markdown cell."""
        return [(self.line + 1 + i, ln[2:] if ln.startswith("# ") else ln.lstrip("#"))
                for i, ln in enumerate(self.lines)]


def split_cells(text: str) -> list[Cell]:
    """The cells of a py:percent source (the jupytext header before the first cell is skipped)."""
    cells: list[Cell] = []
    for number, line in enumerate(text.splitlines(), 1):
        m = _CELL.match(line)
        if m:
            cells.append(Cell("markdown" if "[markdown]" in m["rest"] else "code", number, []))
        elif cells:
            cells[-1].lines.append(line)
    return cells


def _headings(cells: list[Cell]) -> list[tuple[int, str, int]]:
    """(line, title, cell index) of every level-2 heading."""
    out = []
    for index, cell in enumerate(cells):
        if cell.kind != "markdown":
            continue
        for i, ln in enumerate(cell.lines):
            m = _H2.match(ln)
            if m:
                out.append((cell.line + 1 + i, m["title"].strip(), index))
    return out


def _section(cells: list[Cell], heads: list[tuple[int, str, int]], k: int) -> list[Cell]:
    """The cells from heading k up to (not including) the cell of the next heading."""
    start = heads[k][2]
    stop = heads[k + 1][2] if k + 1 < len(heads) else len(cells)
    return cells[start:max(stop, start + 1)]


def _swallowing_handlers(code: str) -> list[int]:
    """Lines of ``except`` clauses catching a broad error whose body only prints or passes."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler):
            continue
        names = ({n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                 | {n.attr for n in ast.walk(node.type) if isinstance(n, ast.Attribute)}) if node.type else {"<bare>"}
        if not (names & _SWALLOWED or "<bare>" in names):
            continue
        quiet = all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and getattr(s.value.func, "id", "") == "print") for s in node.body)
        if quiet:
            found.append(node.lineno)
    return found


def check_chapter(path: Path) -> list[str]:
    """Every convention the source breaks, one readable line each (empty: the chapter conforms)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    cells = split_cells(text)
    where = lambda line: f"{path.name}:{line}"  # noqa: E731
    problems: list[str] = []
    if not cells or cells[0].kind != "markdown" or not re.match(r"^# # (Chapter \d+|Appendix [A-D])\. ", cells[0].lines[0] if cells[0].lines else ""):
        return [f"{where(1)}: the first cell must be markdown starting '# # Chapter N. Title' (or '# # Appendix X. ')"]
    if not any(ln.startswith("# **Prerequisites:**") for ln in cells[0].lines):
        problems.append(f"{where(cells[0].line)}: add a line '# **Prerequisites:** ...' to the title cell")
    heads = _headings(cells)
    titles = [t for _, t, _ in heads]
    expected = [f"{n}." for n in range(1, 10)]
    numbered = [t.split(" ", 1)[0] for t in titles if re.match(r"^\d+\.", t)]
    if numbered != expected:
        problems.append(f"{where(1)}: level-2 sections must be numbered 1. to 9. in order; found {numbered}")
    k9 = next((k for k, t in enumerate(titles) if t.startswith("9. Research directions")), None)
    if k9 is None:
        problems.append(f"{where(1)}: add '# ## 9. Research directions' (open problems with annotated references)")
    else:
        body = [(ln, t) for c in _section(cells, heads, k9) if c.kind == "markdown" for ln, t in c.markdown()]
        problems_listed = [t for _, t in body if re.match(r"^- \*\*.+\*\*", t)]
        years = [t for _, t in body if _YEAR.search(t)]
        if len(problems_listed) < 2:
            problems.append(f"{where(heads[k9][0])}: Research directions needs at least 2 open problems as "
                            f"'- **Problem.** ...' bullets")
        if len(years) < 2:
            problems.append(f"{where(heads[k9][0])}: Research directions needs references with authors, title, "
                            f"venue and year (found {len(years)} dated lines)")
        for ln, t in body:
            if _URL.search(t):
                problems.append(f"{where(ln)}: no links in Research directions (a reader may be offline): "
                                f"cite authors, title, venue, year")
    if not titles or not titles[-1].startswith("What's next"):
        problems.append(f"{where(1)}: the last level-2 section must be '# ## What's next'")
    else:
        nxt = " ".join(t for c in _section(cells, heads, len(heads) - 1) for _, t in c.markdown())
        if not re.search(r"Chapters? \d+|Appendix [A-D]|capstone", nxt, re.I):
            problems.append(f"{where(heads[-1][0])}: What's next must name the chapter (or appendix) that builds on this one")
    k4 = next((k for k, t in enumerate(titles) if t.startswith("4.")), None)
    if k4 is not None and not any(c.kind == "code" and re.search(r"\bshow\(", c.text) for c in _section(cells, heads, k4)):
        problems.append(f"{where(heads[k4][0])}: Section 4 must show the code it teaches: call "
                        f"scaleoutai.notebooks.show(fn) in a code cell")
    for cell in cells:
        if cell.kind == "markdown":
            for ln, t in cell.markdown():
                if _CONTROL.search(t):
                    problems.append(f"{where(ln)}: control character (TAB?) in markdown; use spaces")
                if _PRICE_PROSE.search(t):
                    problems.append(f"{where(ln)}: a price typed in prose; take prices from capstone/prices.yaml")
        else:
            for off in _swallowing_handlers(cell.text):
                problems.append(f"{where(cell.line + off)}: an except clause that only prints or passes hides a "
                                f"failed run; let it fail, or assert what ran (GPU cells: check first, then skip)")
            for i, ln in enumerate(cell.lines):
                if _PRICE_CODE.search(ln) and not ln.lstrip().startswith("#"):
                    problems.append(f"{where(cell.line + 1 + i)}: a price typed in code; read it from capstone/prices.yaml")
    return problems
