"""The gradebook: one row per student id, autograded + hand-graded points, then the late penalty; Canvas CSV.

Everything is rebuilt from the files of a results folder, never appended: ``<id>/results.json`` (the
autograded part, the submission time), ``manual.csv`` (hand grading), ``late.json`` (the policy) and
``roster.csv`` (names, and a row for every student with no submission). Per student,

    score = (auto + manual) - late_points,   late_points = (auto + manual) * percent / 100

and the same figures go into that student's ``results.json`` under ``scaleout.late``, ``scaleout.manual``
and ``scaleout.final`` (the autograded ``score`` stays as graded), with one readable summary appended to
its ``output``. Files are written atomically (a temp file, then a rename).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from ..errors import UserError
from . import results as R

MARK = "--- late work and hand grading ---"
FIXED = ["submission", "name", "email", "score", "max_score", "status", "auto", "auto_max", "manual", "manual_max",
         "late_days", "late_percent", "late_points", "submitted"]


def write_file(path: Path, text: str) -> Path:
    """``R.atomic_write`` whose failure is one UserError naming ``path`` as given (never a temp file)."""
    try:
        R.atomic_write(path, text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc} (give a path in a folder you can write to)") \
            from None
    return path


def _summary(late: dict | None, manual: dict | None, final: dict) -> str:
    from .late import describe

    lines = [MARK]
    if manual:
        got = ", ".join(f"{k} {v['score']:g}/{v['max_score']:g}" for k, v in manual["items"].items())
        lines.append(f"Graded by hand: {manual['score']:g} of {manual['max_score']:g} points ({got or 'not yet'})."
                     + (f" Comments: {manual['comments']}" if manual.get("comments") else ""))
    if late:
        lines.append(describe(late))
    lines.append(f"Total: {final['auto']:g} autograded + {final['manual']:g} by hand - {final['late_points']:g} "
                 f"late = {final['score']:g} of {final['max_score']:g}.")
    return "\n".join(lines)


def _student_row(sid: str, res: dict, items: dict[str, float], scores: dict, policy) -> tuple[dict, dict]:
    """(gradebook row, new ``scaleout`` entries) of one student's result."""
    extra = res.get("scaleout") if isinstance(res.get("scaleout"), dict) else {}
    auto, auto_max = float(res.get("score", 0) or 0), float(res.get("max_score", 0) or 0)
    mine = scores.get(sid, {})
    got = {k: {"score": float(mine[k]), "max_score": p} for k, p in items.items() if k in mine}
    manual_max = sum(items.values())
    manual = {"items": got, "score": round(sum(v["score"] for v in got.values()), 4), "max_score": manual_max,
              "comments": str(mine.get("comments", ""))} if got or mine.get("comments") else None
    late = None
    if policy is not None and extra.get("submitted"):
        from .late import parse_time

        late = policy.assess(sid, parse_time(extra["submitted"], sid))
    m = manual["score"] if manual else 0.0
    points = round((auto + m) * (late["percent"] if late else 0) / 100, 4)
    final = {"auto": auto, "manual": m, "late_points": points, "score": round(auto + m - points, 4),
             "max_score": auto_max + manual_max}
    row = {"submission": sid, "score": final["score"], "max_score": final["max_score"],
           "status": extra.get("status", ""), "auto": auto, "auto_max": auto_max,
           "manual": m if got else "", "manual_max": manual_max if items else "",
           "late_days": late["days"] if late else "", "late_percent": late["percent"] if late else "",
           "late_points": points if late else "", "submitted": extra.get("submitted", "")}
    for t in res.get("tests", []):
        if isinstance(t, dict) and t.get("max_score", 0) > 0:
            row[t["name"]] = t.get("score", 0)
    for k, v in (manual or {}).get("items", {}).items():
        row[f"manual: {k}"] = v["score"]
    shown = late is not None or manual is not None  # what the student's results.json carries
    return row, {"late": late, "manual": manual, "final": final if shown else None}


def _update_results(path: Path, res: dict, new: dict) -> None:
    """Write the late/manual/final entries and the summary into one results.json, only when they changed."""
    extra = dict(res.get("scaleout") or {})
    for k, v in new.items():
        if v is None:
            extra.pop(k, None)
        else:
            extra[k] = v
    output = str(res.get("output", "")).split("\n\n" + MARK)[0].split(MARK)[0]
    if new["final"]:
        output = f"{output}\n\n{_summary(new['late'], new['manual'], new['final'])}" if output else \
            _summary(new["late"], new["manual"], new["final"])
    if extra != res.get("scaleout") or output != res.get("output"):
        R.write_results(path, {**res, "scaleout": extra, "output": output})


def rows(out: Path, lab=None, update: bool = True) -> tuple[list[str], list[dict]]:
    """(columns, rows) of the gradebook of ``out``; ``update`` writes each student's results.json entries."""
    from .late import saved_policy
    from .manual import manual_items, read_saved
    from .roster import saved_roster

    roster, policy = saved_roster(out), saved_policy(out)
    maxima, scores = read_saved(out)
    items = {k: p for k, (p, _) in manual_items(lab).items()} if lab is not None else maxima
    table: list[dict] = []
    tests: list[str] = []
    for f in sorted(out.glob("*/results.json")):
        res = R.load_json(f, R.FILE_CAP)
        if not isinstance(res, dict):
            continue
        row, new = _student_row(f.parent.name, res, items, scores, policy)
        if update and (new["final"] or any(k in (res.get("scaleout") or {}) for k in new)):
            _update_results(f, res, new)
        tests += [k for k in row if k not in FIXED and not k.startswith("manual: ") and k not in tests]
        table.append(row)
    if roster is not None:
        have = {r["submission"] for r in table}
        table += [{"submission": s, "status": "missing"} for s in roster.students if s not in have]
        for r in table:
            s = roster.students.get(r["submission"])
            r.update({"name": s.name, "email": s.email} if s else {})
    table.sort(key=lambda r: r["submission"])
    return [*FIXED, *tests, *(f"manual: {k}" for k in items)], table


def rebuild(out: Path, lab=None) -> Path:
    """``<out>/gradebook.csv``, one row per student id (and per roster student), written atomically."""
    columns, table = rows(out, lab)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, restval="", extrasaction="ignore")
    w.writeheader()
    w.writerows(table)
    path = out / "gradebook.csv"
    R.atomic_write(path, buf.getvalue())
    return path


CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def canvas_text(lab, out: Path, canvas_id: str = "") -> str:
    """A Canvas gradebook import: the five student columns, then "<lab> (<canvas_id>)" with the final points,
    a "Points Possible" row first. Every roster student gets a row (blank points without a submission)."""
    from .roster import saved_roster

    roster = saved_roster(out)
    columns, table = rows(out, lab, update=False)
    column = f"{lab.name} ({canvas_id})" if canvas_id else lab.name
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*CANVAS_COLUMNS, column])
    most = max((float(r["max_score"]) for r in table if r.get("max_score") not in (None, "")), default=0.0)
    w.writerow(["    Points Possible", "", "", "", "", f"{most:g}"])
    for r in table:
        s = roster.students.get(r["submission"]) if roster else None
        extra = s.extra if s else {}
        score = r.get("score", "")
        w.writerow([(s.name if s and s.name else r["submission"]), extra.get("canvas_id", ""),
                    extra.get("sis_user_id", r["submission"]), extra.get("sis_login_id", s.email if s else ""),
                    extra.get("section", ""), "" if score in ("", None) else f"{round(float(score), 2):g}"])
    return buf.getvalue()


def export_canvas(lab, grades: Path, dest: Path, canvas_id: str = "") -> str:
    """``scaleout grade export-canvas``: write the Canvas CSV of a results folder; returns what to print."""
    if not grades.is_dir() or not any(grades.glob("*/results.json")):
        raise UserError(f"{grades}: no graded submissions there; grade the lab first or name its results folder")
    text = canvas_text(lab, grades, canvas_id)
    write_file(dest, text)
    return f"Canvas gradebook ({text.count(chr(10)) - 2} students) written to {dest}; import it in Canvas: Grades, Import"
