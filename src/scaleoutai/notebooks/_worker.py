"""Child process that executes one notebook with papermill: ``python -m scaleoutai.notebooks._worker SPEC``.

SPEC is a JSON file written by ``execute.run_one``; the outcome goes to SPEC["result"] as JSON
{"status": "ok" | "failed" | "timeout", "error": one line}.
"""
from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path
from typing import Any


def _register_literal_translator() -> None:
    """Make papermill write parameters with repr, so tuples, sets and int-keyed dicts survive.

    papermill's PythonTranslator turns a tuple into a string; every smoke value came from
    ast.literal_eval, so repr round-trips it (non-finite floats aside, spelled out here).
    """
    from papermill.translators import PythonTranslator, papermill_translators

    class LiteralTranslator(PythonTranslator):
        @classmethod
        def translate(cls, val: Any) -> str:
            if isinstance(val, float) and not math.isfinite(val):
                return f"float({str(val)!r})"
            return repr(val)

    papermill_translators.register("python", LiteralTranslator)


def execute(spec: dict[str, Any]) -> dict[str, str]:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from .execute import _one_line, read_notebook

    _register_literal_translator()
    parameters = ast.literal_eval(spec["parameters"])
    try:
        papermill.execute_notebook(
            read_notebook(Path(spec["source"])),
            spec["output"],
            parameters=parameters,
            kernel_name="python3",
            cwd=spec["cwd"],
            execution_timeout=spec["timeout"],
            progress_bar=False,
            log_output=False,
        )
    except PapermillExecutionError as exc:
        status = "timeout" if exc.ename in ("CellTimeoutError", "TimeoutError") else "failed"
        return {"status": status, "error": _one_line(f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}")}
    except Exception as exc:  # kernel died, cell timeout raised by nbclient, unreadable source
        status = "timeout" if "Timeout" in type(exc).__name__ else "failed"
        return {"status": status, "error": _one_line(f"{type(exc).__name__}: {exc}")}
    return {"status": "ok", "error": ""}


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    outcome = execute(spec)
    Path(spec["result"]).write_text(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
