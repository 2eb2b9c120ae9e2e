"""Reproducibility packages: ``scaleout repro CHAPTER --out DIR`` and ``scaleout repro --verify DIR`` (issue 21).

A package holds what it takes to get a chapter's results again on another machine: the chapter folder as
it ran, its parameters (smoke or lesson sizes, plus overrides), the seeds, the environment (the course's
pins, every installed distribution, Python, platform, CPU, the course's git commit), the exact commands
(``run.sh``), the executed notebook, an MLflow sqlite store with one run per execution, and
``results.json``: every top-level number the chapter ended with. Packaging runs the chapter twice: numbers
equal in both runs are *reproducible* and ``--verify`` demands them again (ints and bools exactly, floats to
``RTOL``, since another CPU may add in another order); numbers that differ (timings, speedups) are
*measured*, reported and never compared. Every assert of the chapter must hold again on the re-run: that is
the chapter's own check against its single-machine references. Written to a temp folder, then renamed.
"""
from __future__ import annotations

import json
import math
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import UserError

RTOL, ATOL = 1e-6, 1e-12
EXPERIMENT = "repro-{name}"
# appended to a temp copy of the chapter (never to the package's copy): the numbers the run ended with
COLLECTOR = '''
# %%
import json as _json, math as _math
def _repro_number(_v):
    _v = _v.item() if hasattr(_v, "item") and getattr(_v, "ndim", None) == 0 else _v
    if isinstance(_v, bool) or isinstance(_v, int) or isinstance(_v, float) and _math.isfinite(_v):
        return _v
_repro = {{_k: _repro_number(_v) for _k, _v in list(globals().items()) if not _k.startswith("_")}}
with open({path!r}, "w") as _f:
    _json.dump({{_k: _v for _k, _v in _repro.items() if _v is not None}}, _f, sort_keys=True)
'''


def _chapter(root: Path, pattern: str) -> Path:
    from .sources import find_sources

    found = [s for s in find_sources(root, pattern) if s.parent.parent.name == "chapters"]
    if len(found) != 1:
        names = ", ".join(s.stem for s in found[:6]) or "none"
        raise UserError(f"{pattern!r} names {len(found)} chapters ({names}); give one, e.g. '03' or '03-performance-models'")
    return found[0]


def execute(chapter_dir: Path, parameters: dict[str, Any], executed: Path, timeout: float,
            tracking_uri: str | None = None) -> dict[str, Any]:
    """Run a copy of ``chapter_dir``'s notebook with ``parameters``; its final numbers, or UserError if it failed."""
    import os

    from .execute import run_one

    name = chapter_dir.name
    with tempfile.TemporaryDirectory(prefix=f"repro-{name}-") as tmp:
        work = Path(tmp) / name
        shutil.copytree(chapter_dir, work)
        results = Path(tmp) / "results.json"
        source = work / f"{name}.py"
        source.write_text(source.read_text(encoding="utf-8") + COLLECTOR.format(path=str(results)), encoding="utf-8")
        saved = os.environ.get("MLFLOW_TRACKING_URI")
        if tracking_uri:  # chapters that log to the default store log into the package's
            os.environ["MLFLOW_TRACKING_URI"] = tracking_uri
        try:
            record = run_one(source, executed, parameters, timeout)
        finally:
            if saved is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = saved
        if record.status != "ok":
            raise UserError(f"{name} did not run to the end ({record.status}): {record.error}")
        return json.loads(results.read_text())


def split(first: dict[str, Any], second: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(reproducible, measured): names equal in both runs, and names whose values differ (both values)."""
    same = {k: v for k, v in first.items() if k in second and second[k] == v and type(second[k]) is type(v)}
    return same, {k: [first[k], second.get(k)] for k in first if k not in same}


def compare(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """One line per reproducible number the re-run did not give again (ints, bools exactly; floats to RTOL)."""
    problems = []
    for key, want in sorted(expected.items()):
        have = got.get(key)
        if have is None:
            problems.append(f"{key}: {want!r} expected, the re-run did not define it")
        elif isinstance(want, float) and isinstance(have, (int, float)) and not isinstance(have, bool):
            if not math.isclose(have, want, rel_tol=RTOL, abs_tol=ATOL):
                problems.append(f"{key}: {want!r} expected, got {have!r} (rtol {RTOL:g})")
        elif have != want or type(have) is not type(want):
            problems.append(f"{key}: {want!r} expected, got {have!r}")
    return problems


def environment(root: Path) -> dict[str, Any]:
    """Python, platform, CPU, the course's commit and the versions that decide the numbers."""
    from importlib import metadata

    from ..capstone.tracking import hardware

    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or "unknown"
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        commit, dirty = "unknown", False
    versions = {}
    for dist in ("scaleout-ai", "torch", "numpy", "scipy", "ray", "pyspark", "mlflow"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {**hardware(), "platform": platform.platform(), "implementation": platform.python_implementation(),
            "commit": commit, "uncommitted_changes": dirty, "versions": versions}


def _freeze() -> str:
    from importlib import metadata

    pins = {f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]}
    return "\n".join(sorted(pins, key=str.lower)) + "\n"


def _log_runs(uri: str, name: str, parameters: dict[str, Any], env: dict[str, Any], runs: list[dict[str, Any]],
              command: str, final: Path) -> None:
    """One MLflow run per packaging run; the experiment's artifact folder is where the package will live."""
    import mlflow

    from ..capstone.tracking import quiet_mlflow_logs

    quiet_mlflow_logs()
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment(EXPERIMENT.format(name=name), artifact_location=(final / "mlartifacts").as_uri())
    for index, numbers in enumerate(runs):
        run = client.create_run(exp_id, run_name=f"{name}-run{index + 1}", tags={
            "scaleout.commit": env["commit"], "scaleout.command": command, "scaleout.python": env["python"],
            "scaleout.cpu_model": env["cpu_model"]})
        for key, value in sorted(parameters.items()):
            client.log_param(run.info.run_id, key, repr(value)[:500])
        for key, value in sorted(numbers.items()):
            client.log_metric(run.info.run_id, key, float(value))
        client.set_terminated(run.info.run_id)


RUN_SH = """#!/usr/bin/env bash
# Re-run this package: in a checkout of scaleout-ai at commit {commit}, installed with `make install`
# (the pins are environment/constraints.txt), run from anywhere:
#     bash {out}/run.sh
# It executes the chapter with parameters.json and demands every reproducible number of results.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"${{PYTHON:-python}}" -m scaleoutai.cli repro --verify "$here"
"""


def package(root: Path, chapter: str, out: Path, full: bool = False, overrides: dict[str, Any] | None = None,
            timeout: float = 600.0, command: str = "") -> Path:
    """Write the reproducibility package of ``chapter`` to ``out`` (replaced whole) and return it."""
    from .release import replace_folder
    from .sources import smoke_parameters

    root, out = Path(root).resolve(), Path(out).resolve()
    source = _chapter(root, chapter)
    parameters = {**({} if full else smoke_parameters(source)), **(overrides or {})}
    name = source.stem
    with replace_folder(out, root, ("chapters", "src", "labs", "solutions")) as tmp:
        shutil.copytree(source.parent, tmp / "chapter" / name, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
        uri = f"sqlite:///{tmp / 'mlflow.db'}"
        runs = [execute(tmp / "chapter" / name, parameters, tmp / "executed" / f"{name}.ipynb", timeout, uri)]
        with tempfile.TemporaryDirectory(prefix="repro-second-") as second:
            runs.append(execute(tmp / "chapter" / name, parameters, Path(second) / f"{name}.ipynb", timeout, uri))
        reproducible, measured = split(*runs)
        env = environment(root)
        (tmp / "environment").mkdir()
        shutil.copy2(root / "environments" / "constraints.txt", tmp / "environment" / "constraints.txt")
        (tmp / "environment" / "pip-freeze.txt").write_text(_freeze())
        (tmp / "environment" / "platform.json").write_text(json.dumps(env, indent=2, sort_keys=True) + "\n")
        (tmp / "parameters.json").write_text(json.dumps({
            "chapter": name, "size": "lesson" if full else "smoke",
            "injected": {k: repr(v) for k, v in parameters.items()}}, indent=2) + "\n")
        seeds = {k: v for k, v in runs[0].items() if "seed" in k.lower()}
        (tmp / "seeds.json").write_text(json.dumps(seeds, indent=2, sort_keys=True) + "\n")
        (tmp / "results.json").write_text(json.dumps({"reproducible": reproducible, "measured": measured,
                                                      "rtol": RTOL}, indent=2, sort_keys=True) + "\n")
        _log_runs(uri, name, parameters, env, runs, command or f"scaleout repro {chapter} --out {out}", out)
        (tmp / "run.sh").write_text(RUN_SH.format(commit=env["commit"], out=out))
        (tmp / "README.md").write_text(_readme(name, full, parameters, env, reproducible, measured, seeds, out))
    return out


def verify(folder: Path, timeout: float = 600.0) -> list[str]:
    """Re-run a package's chapter with its parameters; the reproducible numbers it did not give again."""
    import ast

    folder = Path(folder).resolve()
    try:
        spec = json.loads((folder / "parameters.json").read_text())
        expected = json.loads((folder / "results.json").read_text())["reproducible"]
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{folder} is not a reproducibility package (parameters.json, results.json): {exc}") from None
    parameters = {k: ast.literal_eval(v) for k, v in spec["injected"].items()}
    with tempfile.TemporaryDirectory(prefix="repro-verify-") as tmp:
        got = execute(folder / "chapter" / spec["chapter"], parameters, Path(tmp) / "executed.ipynb", timeout)
    return compare(expected, got)


def _readme(name: str, full: bool, parameters: dict[str, Any], env: dict[str, Any], reproducible: dict[str, Any],
            measured: dict[str, list[Any]], seeds: dict[str, Any], out: Path) -> str:
    rows = "\n".join(f"| `{k}` | {v!r} |" for k, v in parameters.items()) or "| (the lesson sizes of the parameters cell) | |"
    return f"""# Reproducibility package: {name}

Made from commit `{env['commit']}`{' (with uncommitted changes)' if env['uncommitted_changes'] else ''} on
{env['cpu_model']} ({env['cpu_cores']} cores, GPU: {env['gpu']}), Python {env['python']}, {env['platform']}.
Sizes: {'the lesson sizes' if full else 'the smoke sizes CI runs'}.

| parameter | value |
|---|---|
{rows}

Seeds the chapter ended with: {', '.join(f'`{k}` = {v}' for k, v in seeds.items()) or 'none named *seed*'}.

## Re-run it
1. A checkout of scaleout-ai at commit `{env['commit']}` and `make install` (pins: `environment/constraints.txt`;
   this machine's full list is `environment/pip-freeze.txt`).
2. `bash run.sh` (or `scaleout repro --verify {out}`): the chapter runs with `parameters.json`; every assert
   in it must hold again, and the {len(reproducible)} reproducible numbers of `results.json` must come back
   (integers and booleans exactly, floats to a relative {RTOL:g}).

The {len(measured)} measured numbers ({', '.join(sorted(measured)[:8]) or 'none'}{', ...' if len(measured) > 8 else ''})
differed between the two packaging runs (timings and what is computed from them): they are reported, not
compared. `executed/{name}.ipynb` is the executed notebook; `mlflow.db` holds both packaging runs
(`mlflow ui --backend-store-uri sqlite:///mlflow.db`), with their parameters and numbers.
"""


def repro_command(args: Any) -> int:
    """``scaleout repro CHAPTER --out DIR [--full] [--param NAME=VALUE]`` or ``scaleout repro --verify DIR``."""
    import ast

    from .sources import find_repo_root

    if args.verify:
        problems = verify(args.verify, args.timeout)
        for line in problems:
            print(f"not reproduced: {line}")
        print(f"{args.verify}: " + (f"{len(problems)} number(s) not reproduced" if problems else
                                    "every assert held and every reproducible number came back"))
        return 1 if problems else 0
    if not args.chapter or not args.out:
        raise UserError("give a chapter and --out DIR (scaleout repro 03 --out repro/03), or --verify DIR")
    overrides = {}
    for item in args.param or []:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UserError(f"--param {item!r}: write NAME=VALUE, e.g. --param N=4000")
        try:
            overrides[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise UserError(f"--param {item!r}: {value!r} is not a Python literal (a number, string, tuple, list)") from None
    command = "scaleout repro " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["repro"] else ""
    out = package(find_repo_root(), args.chapter, args.out, args.full, overrides, args.timeout, command)
    print(f"reproducibility package written to {out}; re-run it anywhere with: bash {out}/run.sh")
    return 0


def add_parser(subparsers: Any) -> None:
    from pathlib import Path as _Path

    p = subparsers.add_parser("repro", help="export a chapter's experiment as a reproducibility package, or verify one")
    p.add_argument("chapter", nargs="?", help="chapter folder or name: '03', '03-performance-models'")
    p.add_argument("--out", type=_Path, help="folder for the package (replaced whole)")
    p.add_argument("--full", action="store_true", help="the lesson sizes instead of the smoke sizes CI runs")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="override one parameter (repeatable)")
    p.add_argument("--verify", type=_Path, metavar="DIR", help="re-run a package and compare its numbers")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per execution of the chapter (default 600)")
    p.set_defaults(func=repro_command)
