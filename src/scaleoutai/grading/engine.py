"""Grade one submission from what its sandbox handed back (grader process only).

Loads the hidden tests, builds the seeded plan, and turns what the grader observed of each case (its
own message counts, trace and the values the ranks handed back) into Gradescope tests with partial
credit per case. A case that failed scores 0 with the reason (timeout, memory, exit, crash); the
references are computed here, in the grader.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from . import results as R
from .checks import Case, CaseResult, Fail, NotGraded, Plan, Test
from .labs import Lab, cells_source
from .hub import Outcome
from .jail import Limits
from ..errors import UserError


@dataclass
class Hidden:
    module: ModuleType
    rubric: dict
    plan: Plan
    tests: list[Test]


def load_hidden(lab: Lab) -> Hidden:
    """Import grading/<lab>/tests.py and rubric.yaml; build the plan with the rubric's seed."""
    import yaml

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


def unimportable_files(hidden: Hidden, roots: list[str]) -> list[list[str]]:
    """[module, file] pairs a sandbox covers with stubs: the modules the lab forbids (``UNIMPORTABLE`` in
    tests.py) and, closed over the course's import graph, every course module that reaches one of them
    (``closure``), so that no fake entry in ``sys.modules`` makes a module holding the answer importable.

    Packages the sandbox loads before any student code (numpy, torch) cannot be stubbed; a lab lists
    only modules of the course library and optional packages."""
    from .closure import closure_files
    from .jail import module_file

    forbidden = tuple(getattr(hidden.module, "UNIMPORTABLE", ()))
    for name in forbidden:
        if name.split(".")[0] in ("numpy", "torch"):
            raise ValueError(f"{name} is loaded before student code runs and cannot be made unimportable")
    files = closure_files(forbidden, module_file("scaleoutai", roots)) if forbidden else []
    for name in forbidden:
        path = module_file(name, roots)
        if path and not name.startswith("scaleoutai.") and [name, path] not in files:
            files.append([name, path])
    return files


@dataclass
class RunReport:
    """What happened to a submission as a whole, as the grader observed it."""

    outcomes: dict[str, Outcome]
    cells: dict | None  # rank 0's cell errors and output, None when the cells never finished
    setup_error: str = ""
    confinement: str = ""
    cells_failure: str = ""  # "exit" or "timeout" when the cells never finished


def _run_status(run: RunReport, limits: Limits) -> tuple[str, str]:
    """(status, message) for the "notebook ran" entry."""
    if run.setup_error:
        return "error", f"the grader could not build its sandbox ({run.setup_error[:300]}); tell your instructor"
    if run.cells is None and run.cells_failure == "timeout":
        return "timeout", (f"your notebook's cells were still running at the time limit of {limits.timeout:g} s "
                           f"(an infinite loop, or a fork bomb?); nothing could be graded")
    if run.cells is None:
        return "exit", ("your notebook ended the grader's process while its cells ran: sys.exit, os._exit or "
                        "the memory limit? Remove that code")
    failed = [o.meta.get("error", "") for o in run.outcomes.values() if not o.meta.get("ok")]
    if any("time limit was used up" in e for e in failed):
        return "timeout", (f"grading stopped at the time limit of {limits.timeout:g} s; the cases that did "
                           f"not run score 0 (look for an infinite loop or a recv that nobody sends to)")
    return "ok", ""


def grade_run(hidden: Hidden, run: RunReport | None, cells: list[dict] | None, limits: Limits, error: str = "",
              wall: float = 0.0) -> dict:
    """results.json for one submission. ``error`` (e.g. a malformed notebook) means nothing ran."""
    rubric = hidden.rubric["tests"]
    status, why = ("unreadable", error) if error or run is None else _run_status(run, limits)
    source = cells_source(cells or [])
    entries = []
    for test in hidden.tests:
        pts, vis = float(rubric[test.key]["points"]), rubric[test.key].get("visibility", "visible")
        if error or run is None:
            entries.append(R.test_entry(test.name, 0, pts, f"not graded: {error}", vis))
            continue
        if test.static is not None:
            frac, msg = test.static(source)
            entries.append(R.test_entry(test.name, pts * frac, pts, msg, vis))
            continue
        cases = [c for c in hidden.plan.cases if test.select is None or test.select(c)]
        fracs, notes, waiting = [], [], []
        for case in cases:
            frac, msg = _grade_case(test, case, run.outcomes.get(case.id), why, hidden.plan, source)
            if frac is None:  # graded once another test's mistake is fixed: not charged twice
                waiting.append(f"- {case.label}: {msg}")
                continue
            fracs.append(frac)
            if frac < 1 and len(notes) < 4:
                notes.append(f"- {case.label}: {msg}")
        passed = sum(f >= 1 for f in fracs)
        if fracs:
            head = f"passed {passed} of {len(fracs)} cases"
            head += f" ({len(waiting)} more are graded once their values are right)" if waiting else ""
            score = pts * sum(fracs) / len(fracs)
        else:  # nothing could be graded: the property was never shown
            head, score, notes = f"not graded in any of the {len(cases)} cases yet", 0.0, waiting[:2]
        more = f"\n(and {len(fracs) - passed - len(notes)} more failing cases)" if len(fracs) - passed > len(notes) else ""
        entries.append(R.test_entry(test.name, score, pts, head + ("\n" + "\n".join(notes) if notes else "") + more,
                                    vis))
    run_msg = why or "your notebook ran to the end"
    report = run.cells if run else None
    if report and report.get("errors"):
        run_msg += "\n" + "\n".join(f"cell {e.get('cell')}: {str(e.get('error'))[:400]}"
                                     for e in report["errors"][:3] if isinstance(e, dict))
    if report and report.get("log"):
        log = report["log"]
        cut = " (it printed more than 64 KB; the rest was dropped)" if len(log) >= 64 * 1024 else ""
        run_msg += f"\n--- your notebook printed (first 1000 characters){cut} ---\n" + log[:1000]
    entries.insert(0, R.test_entry("Notebook runs in the grader", 0, 0, run_msg, "visible",
                                   status="passed" if status == "ok" else "failed"))
    score = sum(e["score"] for e in entries)
    top = f"{hidden.module.__doc__.strip().splitlines()[0] if hidden.module.__doc__ else ''}".strip()
    extra = {"status": status, "isolation": limits.mode}
    if run is not None and not error:
        traffic = _traffic(hidden, run)
        if traffic:
            extra["traffic"] = traffic
    if run and run.confinement:  # "cgroup memory=cgroup": how the sandbox's core and memory were confined
        cpu, _, memory = run.confinement.partition(" memory=")
        extra["cpu"] = cpu
        if memory:
            extra["memory"] = memory
    return R.make_results(entries, f"{top}\nscore {score:g} of {sum(e['max_score'] for e in entries):g}. {why}",
                          wall, extra)


def _traffic(hidden: Hidden, run: RunReport, limit: int = 20) -> list[dict]:
    """The grader's own counts per rank (messages, bytes) of the first ``limit`` simulated cases that a
    visible test grades: what the student's feedback shows (hidden tests' cases stay unnamed)."""
    rubric = hidden.rubric["tests"]
    visible = [t for t in hidden.tests if t.static is None and rubric[t.key].get("visibility", "visible") == "visible"]
    rows = []
    for case in hidden.plan.cases:
        if not any(t.select is None or t.select(case) for t in visible):
            continue
        outcome = run.outcomes.get(case.id)
        stats = outcome.meta.get("stats") if outcome is not None and outcome.meta.get("ok") else None
        if isinstance(stats, list) and stats:
            rows.append({"case": case.label, "ranks": stats})
        if len(rows) >= limit:
            break
    return rows


def _grade_case(test: Test, case: Case, outcome: Outcome | None, why: str, plan: Plan,
                source: str) -> tuple[float | None, str]:
    """(fraction, message); fraction None: the case waits for another test's mistake to be fixed."""
    if outcome is None:
        return 0.0, "not run" + (f": {why.split(';')[0]}" if why else "")
    meta = outcome.meta
    if not meta.get("ok"):
        err = str(meta.get("error", "failed"))
        if "NotImplementedError" in err:
            return 0.0, f"{case.fn}() still raises NotImplementedError: replace the stub with your solution"
        return 0.0, err[:1200]
    try:
        res = test.check(CaseResult(case, meta, outcome.arrays, plan, source, outcome.trace, outcome.messages))
    except NotGraded as exc:
        return None, str(exc)
    except Fail as exc:
        return 0.0, str(exc)
    except Exception as exc:  # noqa: BLE001 - hostile data that slipped past validation scores 0
        return 0.0, f"the returned data could not be checked ({type(exc).__name__})"
    frac, msg = res if isinstance(res, tuple) else (float(res), "")
    frac = float(frac) if np.isfinite(frac) else 0.0
    return min(1.0, max(0.0, frac)), msg
