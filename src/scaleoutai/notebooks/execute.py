"""Build .ipynb copies of the chapter sources and execute them with papermill (course tooling).

Each notebook runs in its own child process (``_worker``) in a new session, so a notebook past its
wall-clock limit is killed with its kernel and the others go on. The executed copy is always kept:
on failure it holds the outputs up to the failing cell.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..cluster.procs import stop
from .sources import find_repo_root, smoke_parameters

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
STATUSES = ("ok", "failed", "timeout")


@dataclass(frozen=True)
class RunRecord:
    """Outcome of executing one notebook: status is "ok", "failed" or "timeout"."""

    name: str
    source: Path
    output: Path
    status: str
    seconds: float
    error: str = ""


def output_path(source: Path, out_dir: Path, suffix: str = ".ipynb") -> Path:
    """``out_dir/<chapter folder>/<stem>.ipynb``: one folder per chapter, as in the sources."""
    source = Path(source)
    return Path(out_dir) / source.parent.name / (source.stem + suffix)


def read_notebook(source: Path) -> Any:
    """The source as an nbformat notebook (jupytext py:percent), with the python3 kernel spec."""
    import jupytext

    nb = jupytext.read(str(source), fmt="py:percent")
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = language_info()
    return nb


def language_info() -> dict:
    """What ipykernel reports for this interpreter, in full: a copy that already carries it is not marked
    modified when JupyterLab's kernel starts and fills the field in (issue 35: opening changes nothing)."""
    import copy

    from ipykernel.ipkernel import IPythonKernel

    return copy.deepcopy(dict(IPythonKernel.language_info))


def _write_atomic(nb: Any, path: Path) -> None:
    import nbformat

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            nbformat.write(nb, handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build(sources: Iterable[Path], out_dir: Path | None = None) -> list[Path]:
    """Write ``out_dir/<chapter>/<stem>.ipynb`` for every source (default out_dir: _build/notebooks)."""
    out_dir = Path(out_dir) if out_dir is not None else find_repo_root() / "_build" / "notebooks"
    written = []
    for source in sources:
        target = output_path(source, out_dir)
        _write_atomic(read_notebook(source), target)
        written.append(target)
    return written


def prepare(source: Path, output: Path, parameters: dict[str, Any]) -> Path:
    """Write ``source`` as a notebook with ``parameters`` injected by papermill, not executed; return the path.

    CI runs chapters this way: papermill injects the smoke sizes, nbval executes and validates the copy,
    so each chapter runs once. The cell papermill adds is the one ``run`` would execute."""
    import papermill

    from ._worker import _register_literal_translator

    _register_literal_translator()
    nb = papermill.execute_notebook(read_notebook(Path(source)), None, parameters=parameters, prepare_only=True,
                                    kernel_name="python3", progress_bar=False, log_output=False)
    _write_atomic(nb, Path(output))
    return Path(output)


def _one_line(text: str, limit: int = 240) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _running_cell(output: Path) -> str:
    """Where a killed run stopped, read from papermill's per-cell status in the partial copy."""
    try:
        import nbformat

        nb = nbformat.read(str(output), as_version=4)
    except Exception:
        return ""
    for index, cell in enumerate(nb.cells):
        if cell.get("metadata", {}).get("papermill", {}).get("status") == "running":
            return f" in cell {index}"
    return ""


def _keep_interrupted(source: Path, partial: Path, interrupted: Path) -> None:
    """A stopped run's notebook, as far as it got (or unexecuted, if it never saved), under its own name."""
    if not partial.exists():
        _write_atomic(read_notebook(source), partial)
    os.replace(partial, interrupted)


def run_one(source: Path, output: Path, parameters: dict[str, Any], timeout: float,
            cwd: Path | None = None) -> RunRecord:
    """Execute one source with papermill in a child process, killed after ``timeout`` seconds, in ``cwd``
    (default: the source's folder, where a chapter finds its helper modules).

    Only a run that finished (ok or failed) lands at ``output``; a stopped one (time limit, Ctrl-C) is
    kept beside it as ``NAME.interrupted.ipynb``, so the output path never holds a partial notebook."""
    source, output = Path(source).resolve(), Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    name = source.stem
    # papermill saves as it goes: it writes beside the output, which only a finished run replaces
    partial = output.with_name(f".{output.stem}.running.ipynb")
    interrupted = output.with_name(f"{output.stem}.interrupted.ipynb")
    for stale in (output, interrupted):
        stale.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="scaleout-nb-") as tmp:
        spec, result = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec.write_text(json.dumps({
            "source": str(source), "output": str(partial.resolve()), "cwd": str(cwd or source.parent),
            "parameters": repr(parameters), "timeout": timeout, "result": str(result),
        }))
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "scaleoutai.notebooks._worker", str(spec)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop([proc], grace=5)
            seconds = time.perf_counter() - start
            _keep_interrupted(source, partial, interrupted)
            error = f"killed after {timeout:g} s wall time{_running_cell(interrupted)}"
            return RunRecord(name, source, interrupted, "timeout", seconds, error)
        except BaseException:  # Ctrl-C or a test timeout: the worker has its own session, take it down
            stop([proc], grace=5)
            _keep_interrupted(source, partial, interrupted)
            raise
        seconds = time.perf_counter() - start
        if result.is_file() and partial.exists():
            os.replace(partial, output)  # a finished run, whatever its status
            outcome = json.loads(result.read_text())
            return RunRecord(name, source, output, outcome["status"], seconds, outcome["error"])
    _keep_interrupted(source, partial, interrupted)
    tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
    return RunRecord(name, source, output, "failed", seconds, _one_line(f"worker crashed: {tail[0]}"))


def run(
    sources: Iterable[Path],
    smoke: bool = False,
    timeout: float = 120,
    out_dir: Path | None = None,
    progress: bool = True,
) -> list[RunRecord]:
    """Execute every source with papermill into ``out_dir`` (default _build/executed), one at a time.

    ``smoke`` injects the ``# smoke:`` values of the parameters cell. A failure or timeout is recorded
    and the next notebook runs. With ``progress``, a tqdm bar runs on stderr and a summary table of
    name, status, seconds and error is printed to stdout at the end.
    """
    from tqdm import tqdm

    sources = list(sources)
    out_dir = Path(out_dir) if out_dir is not None else find_repo_root() / "_build" / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)  # an unusable --out fails here, before any notebook runs
    records = []
    bar = tqdm(sources, desc="notebooks", unit="nb", disable=not progress, file=sys.stderr)
    for source in bar:
        bar.set_postfix_str(Path(source).stem)
        parameters = smoke_parameters(source) if smoke else {}
        records.append(run_one(source, output_path(source, out_dir), parameters, timeout))
    bar.close()
    if progress:
        print(format_summary(records))
        print(f"executed notebooks in {out_dir} (a run that was stopped is kept as NAME.interrupted.ipynb)")
    return records


def format_summary(records: list[RunRecord]) -> str:
    """A plain-text table: one row per notebook (name, status, seconds, error) and a total line."""
    rows = [("notebook", "status", "seconds", "error")]
    rows += [(r.name, r.status, f"{r.seconds:.1f}", r.error) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]), row[3]]).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  -----")
    ok = sum(r.status in ("ok", "cached") for r in records)  # "cached": an earlier ok run reused (site)
    total = sum(r.seconds for r in records)
    lines.append(f"{ok}/{len(records)} ok in {total:.1f} s")
    return "\n".join(lines)
