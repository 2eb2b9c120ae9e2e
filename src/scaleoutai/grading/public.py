"""Public tests as named checks: what a student runs from a lab notebook's last cell.

A lab's ``public_tests.py`` marks each check with ``@check``; a check's parameters are named after the
notebook's functions, which ``run_checks`` looks up in the namespace it is given (``globals()``)::

    @check
    def sums_on_three_ranks(ring_allreduce):
        "the sum on every rank, K = 3"
        assert ..., "the message that teaches"

    run_checks(public_tests, globals())          # every check, "n of m checks passed", then raise if any failed
    run_checks(public_tests, globals(), "sums_on_three_ranks")   # one check, as otter's grader.check("q1")

Every check runs, whatever the others do; a failure prints one line (the assert's message, or the
exception's type and message and the function it came from), never a traceback. ``run_checks`` raises
``ChecksFailed`` at the end when any check failed, so the cell fails visibly. When the environment
names ``SCALEOUT_CHECKS_JSON`` the outcome is also written there as JSON (``scaleout validate`` reads it).
grading/README.md, "Feedback and public checks".
"""
from __future__ import annotations

import inspect
import itertools
import json
import os
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

ENV_JSON = "SCALEOUT_CHECKS_JSON"
_LIBRARY = str(Path(__file__).resolve().parents[1])  # frames in scaleoutai are not where the student looks
_ORDER = itertools.count()


class ChecksFailed(AssertionError):
    """Raised by ``run_checks`` after every check ran, when at least one failed."""


@dataclass
class Outcome:
    name: str
    passed: bool
    message: str = ""  # one line: why it failed
    about: str = ""  # the check's docstring: what it checks


def check(fn: Callable | str | None = None, *, name: str | None = None) -> Callable:
    """Mark a function as a named check: ``@check``, ``@check("name")`` or ``@check(name="name")``."""
    if isinstance(fn, str):
        name, fn = fn, None

    def mark(f: Callable) -> Callable:
        f.__check_name__ = name or f.__name__
        f.__check_order__ = next(_ORDER)
        return f

    return mark(fn) if callable(fn) else mark


def collect(tests: ModuleType | Iterable) -> list[tuple[str, Callable]]:
    """(name, fn) of every check: the ``@check`` functions of a module in the order they were defined,
    or a list of (name, fn) pairs / marked functions as given."""
    if isinstance(tests, ModuleType):
        marked = [v for v in vars(tests).values() if callable(v) and hasattr(v, "__check_order__")]
        return [(f.__check_name__, f) for f in sorted(marked, key=lambda f: f.__check_order__)]
    out = []
    for item in tests:
        out.append(item if isinstance(item, tuple) else (getattr(item, "__check_name__", item.__name__), item))
    return out


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _where(exc: BaseException, tests_file: str | None) -> str:
    """The innermost frame outside the public tests and this module: the student's function, usually."""
    frames = [(f.f_code, n) for f, n in traceback.walk_tb(exc.__traceback__)
              if f.f_code.co_filename != tests_file and not f.f_code.co_filename.startswith(_LIBRARY)
              and "site-packages" not in f.f_code.co_filename]
    if not frames:
        return ""
    code, line = frames[-1]
    name = getattr(code, "co_qualname", code.co_name)  # PASHA.__init__, not __init__
    return f" (in {name}, line {line})" if name != "<module>" else f" (line {line})"


def _message(exc: BaseException, tests_file: str | None) -> str:
    if isinstance(exc, AssertionError):
        text = str(exc)
        if text:
            return _one_line(text)
        tb = traceback.extract_tb(exc.__traceback__)
        last = tb[-1] if tb else None  # an assert without a message: show the line that failed
        return _one_line(f"assertion failed: {last.line}" if last and last.line else "assertion failed")
    first = (str(exc).strip().splitlines() or [""])[0]  # a rank's error carries its traceback after line 1
    if isinstance(exc, NotImplementedError):
        return _one_line(f"NotImplementedError{_where(exc, tests_file)}: {first or 'still a stub'}")
    return _one_line(f"{type(exc).__name__}{_where(exc, tests_file)}: {first}")


def run_one(name: str, fn: Callable, namespace: Mapping[str, Any]) -> Outcome:
    """Run one check with its parameters taken from ``namespace``; never raises (but KeyboardInterrupt)."""
    about = _one_line((inspect.getdoc(fn) or "").split("\n\n")[0], 200)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty]
    missing = [p.name for p in params if p.name not in namespace]
    if missing:
        return Outcome(name, False, f"the notebook does not define {', '.join(missing)}: run the cells above "
                                    f"this one first (and keep the names the lab gives)", about)
    try:
        fn(**{p.name: namespace[p.name] for p in params})
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: a check reports, it never ends the kernel
        return Outcome(name, False, _message(exc, inspect.getsourcefile(fn)), about)
    return Outcome(name, True, "", about)


def run_checks(tests: ModuleType | Iterable, namespace: Mapping[str, Any] | None = None,
               only: str | Iterable[str] | None = None, out=None) -> list[Outcome]:
    """Run every check (or those named in ``only``), print "n of m checks passed" and one line per
    failure, write the outcome to $SCALEOUT_CHECKS_JSON if set, and raise ChecksFailed if any failed."""
    __tracebackhide__ = True  # noqa: F841 - IPython hides this frame: the cell shows the summary, not our code
    out = out or sys.stdout
    namespace = namespace if namespace is not None else {}
    checks = collect(tests)
    if only is not None:
        wanted = [only] if isinstance(only, str) else list(only)
        unknown = [w for w in wanted if w not in {n for n, _ in checks}]
        if unknown:
            raise ValueError(f"no check named {', '.join(map(repr, unknown))}; the checks are "
                             f"{', '.join(n for n, _ in checks)}")
        checks = [(n, f) for n, f in checks if n in wanted]
    outcomes = [run_one(name, fn, namespace) for name, fn in checks]
    passed = sum(o.passed for o in outcomes)
    failed = [o for o in outcomes if not o.passed]
    print(f"{passed} of {len(outcomes)} checks passed", file=out)
    for o in failed:
        print(f"  FAILED {o.name}: {o.message}", file=out)
    note = getattr(tests, "NOTE", "") if isinstance(tests, ModuleType) else ""
    if not failed and note:
        print(note, file=out)
    out.flush()
    target = os.environ.get(ENV_JSON)
    if target:
        Path(target).write_text(json.dumps({"passed": passed, "total": len(outcomes),
                                            "checks": [asdict(o) for o in outcomes]}))
    if failed:
        raise ChecksFailed(f"{len(failed)} of {len(outcomes)} checks failed: {', '.join(o.name for o in failed)}")
    return outcomes


def _notebook_cells(path: Path) -> Any:
    """The student's notebook as nbformat (an .ipynb, or a py:percent .py); UserError with one line otherwise."""
    import nbformat

    from ..errors import UserError

    if not path.exists():
        raise UserError(f"{path} does not exist; give the path of your lab notebook (.ipynb)")
    if not path.is_file() or path.suffix not in (".ipynb", ".py"):
        raise UserError(f"{path} is not a notebook; give your lab's .ipynb file")
    try:
        if path.suffix == ".py":
            import jupytext

            return jupytext.read(str(path), fmt="py:percent")
        return nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - whatever the file holds, the student gets one line
        raise UserError(f"{path} is not a readable notebook ({type(exc).__name__}); save it from Jupyter "
                        f"and try again") from None


def validate(lab: Any, notebook: Path, timeout: float = 600) -> tuple[bool, list[str]]:
    """Run ``notebook`` top to bottom in a clean kernel (nbclient, as the course runs notebooks) with the
    lab's own public tests in place of its ``public-tests`` cell; return (all passed, lines to print)."""
    import shutil
    import subprocess
    import tempfile

    import jupytext
    from nbclient import NotebookClient

    from ..notebooks.execute import KERNELSPEC
    from .labs import PUBLIC_TAG

    nb = _notebook_cells(Path(notebook))
    ref = jupytext.read(str(lab.source), fmt="py:percent")
    public = [c for c in ref.cells if PUBLIC_TAG in c.get("metadata", {}).get("tags", [])]
    nb.cells = [c for c in nb.cells if PUBLIC_TAG not in c.get("metadata", {}).get("tags", [])] + public[-1:]
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="scaleout-validate-") as tmp:
        if lab.public_tests.is_file():
            shutil.copy(lab.public_tests, Path(tmp) / "public_tests.py")
        result = Path(tmp) / ".checks.json"
        env = dict(os.environ, **{ENV_JSON: str(result)})
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": tmp}})
        try:
            client.execute(env=env, stderr=subprocess.DEVNULL)  # the kernel's own warnings are not the student's
        except Exception as exc:  # noqa: BLE001 - a dead kernel or a cell past the time limit
            lines.append(f"the notebook did not run to the end: {_one_line(f'{type(exc).__name__}: {exc}', 300)}")
        last = len(nb.cells) - 1
        for i, cell in enumerate(nb.cells[:last] if public else nb.cells):
            for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
                if o.get("output_type") == "error":
                    head = next((ln for ln in cell.source.splitlines() if ln.strip()), "")[:60]
                    lines.append(f"cell {i + 1} ({head}) raised {_one_line(f'{o.ename}: {o.evalue}', 300)}")
        outcome = json.loads(result.read_text()) if result.is_file() else None
    if outcome is None:
        lines.append("the public tests did not run (see the lines above); fix the notebook and validate again")
        return False, lines
    lines.append(f"{outcome['passed']} of {outcome['total']} checks passed")
    lines += [f"  FAILED {c['name']}: {c['message']}" for c in outcome["checks"] if not c["passed"]]
    ok = outcome["passed"] == outcome["total"] and not any(ln.startswith("cell ") for ln in lines)
    return ok, lines
