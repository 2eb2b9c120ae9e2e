"""`show(fn)`: a chapter reads the library's code without copying it (DESIGN.md, Notebooks).

Section 4 of a chapter calls ``show(ring_allreduce)``; the cell's output is the function's source,
syntax-highlighted, headed by the file and line range it came from, so the library stays the one
source of truth and the reader still sees the algorithm.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Source:
    """The source of one library object, rendered as highlighted code in a notebook."""

    name: str
    path: str
    first_line: int
    code: str

    @property
    def last_line(self) -> int:
        return self.first_line + self.code.count("\n") - (1 if self.code.endswith("\n") else 0)

    @property
    def header(self) -> str:
        return f"# {self.name}  ({self.path}, lines {self.first_line}-{self.last_line})"

    def __repr__(self) -> str:
        return f"{self.header}\n{self.code.rstrip()}"

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.header}\n{self.code.rstrip()}\n```"

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        formatter = HtmlFormatter(noclasses=True, style="default", nowrap=False)
        return highlight(f"{self.header}\n{self.code.rstrip()}\n", PythonLexer(), formatter)


def _package_relative(path: str) -> str:
    parts = Path(path).parts
    if "scaleoutai" in parts:
        return "/".join(parts[len(parts) - parts[::-1].index("scaleoutai") - 1:])
    return Path(path).name


def source_of(obj: Any) -> Source:
    """The source of a function, class, method or module of the library, with where it lives."""
    target = inspect.unwrap(obj) if callable(obj) else obj
    try:
        lines, first = inspect.getsourcelines(target)
        path = inspect.getsourcefile(target) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise TypeError(f"show() needs a function, class or module defined in a .py file; "
                        f"got {obj!r} ({exc})") from None
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    module = getattr(target, "__module__", None)
    if module and not inspect.ismodule(target):
        name = f"{module}.{name}"
    return Source(name=name, path=_package_relative(path), first_line=max(first, 1), code="".join(lines))


def show(*objs: Any) -> Any:
    """Display the highlighted source of each object; returns the last one's `Source` for a bare cell."""
    sources = [source_of(o) for o in objs]
    if not sources:
        raise TypeError("show() needs at least one function, class or module")
    try:
        from IPython.display import display
        from IPython import get_ipython
    except ImportError:  # plain Python: print instead
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is not None and get_ipython() is not None:
        for s in sources[:-1]:
            display(s)
        return sources[-1]
    for s in sources:
        print(repr(s))
    return None
