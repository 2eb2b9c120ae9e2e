"""Grade one submission from what its sandbox handed back (grader process only).

Loads the hidden tests, builds the seeded plan, prepares a working dir, and turns the returned cases
into Gradescope tests with partial credit per case. A case that never came back scores 0 with the
reason (timeout, memory, exit, crash); the references are computed here, after the sandbox is gone.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import results as R
from .checks import Case, CaseResult, Fail, Plan, Test
from .labs import Lab, cells_source
from .sandbox import DRIVER_FAILED, SETUP_FAILED, Limits


@dataclass
class Hidden:
    module: ModuleType
    rubric: dict
    plan: Plan
    tests: list[Test]


def load_hidden(lab: Lab) -> Hidden:
    """Import grading/<lab>/tests.py and rubric.yaml; build the plan with the rubric's seed."""
    import yaml

    from scaleoutai.cli import UserError

    path = lab.grading / "tests.py"
    if not path.is_file():
        raise UserError(f"{path} is missing: a lab needs hidden tests in grading/{lab.name}/tests.py")
    spec = importlib.util.spec_from_file_location(f"_scaleout_hidden_{lab.name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rubric = yaml.safe_load((lab.grading / "rubric.yaml").read_text())
    plan = module.plan(np.random.default_rng(int(rubric.get("seed", 0))))
    tests = list(module.TESTS)
    missing = [t.key for t in tests if t.key not in rubric.get("tests", {})]
    if missing:
        raise UserError(f"grading/{lab.name}/rubric.yaml gives no points for {missing}; add them under tests:")
    return Hidden(module, rubric, plan, tests)


def prepare_workdir(workdir: Path, cells: list[dict], hidden: Hidden, limits: Limits, uid: int | None) -> None:
    """The sandbox's only folder: the code cells, the public plan, the inputs, an empty out/."""
    (workdir / "out").mkdir(parents=True)
    (workdir / "cells.json").write_text(json.dumps(cells))
    budget = max(1.0, limits.timeout - 3.0)  # leave time to write the last case before the kill
    (workdir / "plan.json").write_text(json.dumps({"cases": [c.public() for c in hidden.plan.cases],
                                                   "budget": budget}))
    with open(workdir / "inputs.npz", "wb") as f:
        np.savez(f, **hidden.plan.inputs)
    if uid is not None:
        for p in [workdir, *workdir.rglob("*")]:
            os.lchown(p, uid, 65534)
        os.chmod(workdir, 0o700)


def _run_status(done: dict | None, workdir: Path, limits: Limits, cells_meta: Any, aborted: Any) -> tuple[str, str]:
    """(status, message) for the "notebook ran" entry."""
    if done is None:
        return "failed", ""
    code = done.get("status", 0)
    if code == SETUP_FAILED:
        why = (R.read_capped(workdir / "setup_error.txt", 4096) or b"?").decode(errors="replace")
        return "error", f"the grader could not build its sandbox ({why}); tell your instructor"
    if code == DRIVER_FAILED:
        why = (R.read_capped(workdir / "driver_error.txt", 4096) or b"?").decode(errors="replace")
        return "error", f"the grader failed while running your notebook; tell your instructor ({why.strip().splitlines()[-1][:300]})"
    if done.get("timed_out"):
        return "timeout", (f"your notebook was stopped after the time limit of {limits.timeout:g} s; "
                           f"look for an infinite loop or a recv that nobody sends to")
    if code is not None and code < 0:
        hint = " (the memory limit of %d MB?)" % limits.memory_mb if code == -9 else ""
        return "killed", f"the process running your notebook was killed by signal {-code}{hint}"
    if not isinstance(cells_meta, dict):
        return "exit", ("your notebook ended the grader's process while its cells ran (sys.exit, os._exit "
                        "or exit()?); remove that call")
    if isinstance(aborted, dict):
        return "aborted", f"grading stopped early: {str(aborted.get('why', ''))[:300]}"
    if not isinstance(R.load_json(workdir / "out" / "_done.json"), dict):
        return "exit", ("your code ended the grader's process before every case ran (os._exit or a crash "
                        "inside your functions?); the cases that did not run score 0")
    return "ok", ""


def grade_workdir(hidden: Hidden, workdir: Path | None, done: dict | None, cells: list[dict] | None,
                  limits: Limits, error: str = "", wall: float = 0.0) -> dict:
    """results.json for one submission. ``error`` (e.g. a malformed notebook) means nothing ran."""
    rubric = hidden.rubric["tests"]
    out = workdir / "out" if workdir else None
    cells_meta = R.load_json(out / "_cells.json") if out else None
    aborted = R.load_json(out / "_aborted.json") if out else None
    status, why = ("unreadable", error) if error else _run_status(done, workdir, limits, cells_meta, aborted)
    source = cells_source(cells or [])
    entries = []
    for test in hidden.tests:
        pts, vis = float(rubric[test.key]["points"]), rubric[test.key].get("visibility", "visible")
        if error:
            entries.append(R.test_entry(test.name, 0, pts, f"not graded: {error}", vis))
            continue
        if test.static is not None:
            frac, msg = test.static(source)
            entries.append(R.test_entry(test.name, pts * frac, pts, msg, vis))
            continue
        cases = [c for c in hidden.plan.cases if test.select is None or test.select(c)]
        fracs, notes = [], []
        for case in cases:
            frac, msg = _grade_case(test, case, out, why, hidden.plan, source)
            fracs.append(frac)
            if frac < 1 and len(notes) < 4:
                notes.append(f"- {case.label}: {msg}")
        passed = sum(f >= 1 for f in fracs)
        head = f"passed {passed} of {len(cases)} cases"
        more = f"\n(and {len(cases) - passed - len(notes)} more failing cases)" if len(cases) - passed > len(notes) else ""
        entries.append(R.test_entry(test.name, pts * (sum(fracs) / max(1, len(fracs))), pts,
                                    head + ("\n" + "\n".join(notes) if notes else "") + more, vis))
    run_msg = why or "your notebook ran to the end"
    if isinstance(cells_meta, dict) and cells_meta.get("cell_errors"):
        errs = cells_meta["cell_errors"][:3]
        run_msg += "\n" + "\n".join(f"cell {e.get('cell')}: {str(e.get('error'))[:400]}" for e in errs
                                    if isinstance(e, dict))
    log = R.read_capped(workdir / "log.txt", 1 << 20) if workdir else None
    if log:
        cut = " (it printed more than 64 KB; the rest was dropped)" if len(log) >= 64 * 1024 else ""
        run_msg += f"\n--- your notebook printed (first 1000 characters){cut} ---\n" + log[:1000].decode(errors="replace")
    entries.insert(0, R.test_entry("Notebook runs in the grader", 0, 0, run_msg, "visible",
                                   status="passed" if status == "ok" else "failed"))
    score = sum(e["score"] for e in entries)
    top = f"{hidden.module.__doc__.strip().splitlines()[0] if hidden.module.__doc__ else ''}".strip()
    return R.make_results(entries, f"{top}\nscore {score:g} of {sum(e['max_score'] for e in entries):g}. {why}",
                          wall, {"status": status, "isolation": limits.mode})


def _grade_case(test: Test, case: Case, out: Path | None, why: str, plan: Plan, source: str) -> tuple[float, str]:
    meta = R.load_json(out / f"{case.id}.json") if out else None
    if not isinstance(meta, dict):
        return 0.0, "not run" + (f": {why.split(';')[0]}" if why else "")
    if not meta.get("ok"):
        err = str(meta.get("error", "failed"))
        if "NotImplementedError" in err:
            return 0.0, f"{case.fn}() still raises NotImplementedError: replace the stub with your solution"
        return 0.0, err[:1200]
    arrays = R.load_npz(out / f"{case.id}.npz") or {}
    try:
        res = test.check(CaseResult(case, meta, arrays, plan, source))
    except Fail as exc:
        return 0.0, str(exc)
    except Exception as exc:  # noqa: BLE001 - hostile data that slipped past validation scores 0
        return 0.0, f"the returned data could not be checked ({type(exc).__name__})"
    frac, msg = res if isinstance(res, tuple) else (float(res), "")
    frac = float(frac) if np.isfinite(frac) else 0.0
    return min(1.0, max(0.0, frac)), msg


def remove_workdir(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
