"""Mutation testing of a rubric: known-wrong submissions that must lose their points (grading/README.md).

A mutant is ``grading/labNN-slug/mutants/<name>.py``: a header, then code that is appended as a last
cell to the reference solution, so it redefines what the student writes::

    # mutant: a rank returns its own input: no communication at all
    # loses: correct_sim, correct_process, bandwidth, send_recv_only
    def ring_allreduce(comm, x):
        return x.copy()

An optional ``# says: words`` line names words the feedback of a lost test must contain, and an optional
``# score-at-most: P`` line the highest share of the points (percent) the mutant may keep. Every lab ships
``pasted_course.py``: the closest function of the library or a chapter, adapted by hand to the lab's
signature; it keeps at most ``PASTED_SHARE`` percent and its feedback says what the lab asks beyond it.
A mutant that changes a line or two of the reference says so instead of copying it: a top-level
``REPLACE = [("old text", "new text"), ...]`` (each old text must occur exactly once in the solution
source) is applied to the solution first; any other code in the file is appended as the last cell::

    # mutant: nothing is ever dropped
    # loses: drops
    REPLACE = [("kept = slot < cap", "kept = slot >= 0")]

``loses`` names the rubric keys (tests.py ``Test.key``) that must score below their points; every
other test must keep all of its points. ``grade_mutants`` grades the reference, the blank release and
every mutant of a lab in one batch and returns what went against those labels.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .labs import Lab, assign, solution_notebook


PASTED = "pasted_course"  # the mutant every lab ships: the course's closest code, adapted by hand
PASTED_SHARE = 50.0  # percent of the points it may keep at most


@dataclass(frozen=True)
class Mutant:
    name: str
    why: str
    loses: frozenset[str]
    code: str  # appended as the last cell (may be empty)
    replace: tuple[tuple[str, str], ...] = ()  # edits of the solution source, applied first
    says: str = ""  # words the feedback of a lost test must contain (the mistake named, teaching)
    score_at_most: float = 100.0  # percent of the points it may keep


def _split_replace(text: str, path: Path) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(code to append, replacements) of a mutant file; REPLACE is read as a literal, never executed."""
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["REPLACE"]:
            pairs = ast.literal_eval(node.value)
            if not (isinstance(pairs, list) and all(isinstance(p, tuple) and len(p) == 2 for p in pairs)):
                raise ValueError(f"{path}: REPLACE must be a list of (old, new) string pairs")
            lines = text.splitlines(keepends=True)
            rest = "".join(lines[:node.lineno - 1] + lines[node.end_lineno:])
            code = rest if len(tree.body) > 1 else ""  # other statements: appended as the last cell
            return code, tuple((str(a), str(b)) for a, b in pairs)
    return text, ()


def load_mutants(lab: Lab) -> list[Mutant]:
    """Every mutant of ``lab``, checked for a description and a non-empty ``loses`` line."""
    out = []
    for path in sorted((lab.grading / "mutants").glob("*.py")):
        text = path.read_text()
        why = re.search(r"^# mutant: (.+)$", text, re.M)
        loses = re.search(r"^# loses: (.+)$", text, re.M)
        if not why or not loses:
            raise ValueError(f"{path}: a mutant starts with '# mutant: <what is wrong>' and '# loses: <test keys>'")
        keys = frozenset(k.strip() for k in loses.group(1).split(",") if k.strip())
        says = re.search(r"^# says: (.+)$", text, re.M)
        cap = re.search(r"^# score-at-most: ([0-9.]+)$", text, re.M)
        if path.stem == PASTED and (not says or not cap or float(cap.group(1)) > PASTED_SHARE):
            raise ValueError(f"{path}: the pasted-course mutant needs '# says: <what the lab asks beyond the course>' "
                             f"and '# score-at-most: <percent, at most {PASTED_SHARE:g}>'")
        code, replace = _split_replace(text, path)
        out.append(Mutant(path.stem, why.group(1).strip(), keys, code, replace, says.group(1).strip() if says else "",
                          float(cap.group(1)) if cap else 100.0))
    return out


def mutant_notebook(lab: Lab, mutant: Mutant, dest: Path) -> Path:
    """The reference solution, edited by the mutant's REPLACE pairs, with its code as the last cell."""
    source = lab.source.read_text()
    for old, new in mutant.replace:
        if source.count(old) != 1:
            raise ValueError(f"mutant {mutant.name}: {old[:60]!r} occurs {source.count(old)} times in {lab.source.name}; "
                             f"it must occur exactly once")
        source = source.replace(old, new)
    solution_notebook(lab, dest, source)
    nb = json.loads(dest.read_text())
    if mutant.code.strip():
        nb["cells"].append({"cell_type": "code", "execution_count": None, "id": f"mutant-{mutant.name}",
                            "metadata": {}, "outputs": [], "source": mutant.code})
    dest.write_text(json.dumps(nb))
    return dest


def grade_mutants(lab: Lab, work: Path, jobs: int = 2, timeout: float | None = None) -> tuple[dict, list[str]]:
    """Grade reference, blank and every mutant; returns (results by submission, list of violations)."""
    from .engine import load_hidden
    from .jail import Limits
    from .runner import grade_batch

    hidden = load_hidden(lab)
    names = {t.key: t.name for t in hidden.tests}
    points = {k: float(v["points"]) for k, v in hidden.rubric["tests"].items()}
    subs = work / "subs"
    subs.mkdir(parents=True, exist_ok=True)
    solution_notebook(lab, subs / "reference.ipynb")
    shutil.copy(assign(lab, work / "release") / f"{lab.name}.ipynb", subs / "blank.ipynb")
    mutants = load_mutants(lab)
    for m in mutants:
        mutant_notebook(lab, m, subs / f"mutant-{m.name}.ipynb")
    limits = Limits(timeout=timeout or float(hidden.rubric.get("timeout", 60)))
    grade_batch(lab, [subs], work / "out", jobs=jobs, quiet=True, limits=limits)
    results = {p.parent.name: json.loads(p.read_text()) for p in (work / "out").glob("*/results.json")}
    bad = []
    total = sum(points.values())
    if results["reference"]["score"] != total:
        bad.append(f"reference scored {results['reference']['score']} of {total}")
    if results["blank"]["score"] != 0:
        bad.append(f"the blank release scored {results['blank']['score']}")
    for m in mutants:
        unknown = m.loses - set(names)
        if unknown:
            bad.append(f"mutant {m.name} names unknown tests {sorted(unknown)}")
        got = {t["name"]: t for t in results[f"mutant-{m.name}"]["tests"]}
        for key, name in names.items():
            t = got[name]
            if key in m.loses and t["score"] >= t["max_score"]:
                bad.append(f"mutant {m.name} ({m.why}) kept all points of {key}")
            elif key not in m.loses and t["score"] < t["max_score"]:
                bad.append(f"mutant {m.name} lost points of {key}, which it should pass: {t['output'][:300]}")
        score = results[f"mutant-{m.name}"]["score"]
        if score > total * m.score_at_most / 100 + 1e-9:
            bad.append(f"mutant {m.name} scored {score:g} of {total:g}, above its {m.score_at_most:g}%")
        lost = " ".join(got[names[k]]["output"] for k in m.loses if k in names)
        if m.says and m.says not in lost:
            bad.append(f"mutant {m.name}: no lost test's feedback says {m.says!r}")
    return results, bad
