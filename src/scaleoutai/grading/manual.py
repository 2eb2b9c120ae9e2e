"""Grading by hand: the rubric's ``manual:`` items, a score sheet the instructor fills, and its merge.

``grading/<lab>/rubric.yaml`` may hold ``manual: {key: {points: P, description: "..."}}``. The sheet
(``scaleout grade-manual sheet LAB --out sheet.csv``) has the columns ``id, name, <key>..., comments``, a
first row ``(max points)`` and one row per graded student, filled with the scores merged so far. A merge
(``scaleout grade-manual merge LAB sheet.csv``) checks the whole sheet first (known ids, numbers from 0 to
the item's points, known columns), then keeps the scores in ``<out>/manual.csv``; a blank cell leaves a
score as it was. The gradebook adds them to the autograded points before any late penalty.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from ..errors import UserError
from .labs import Lab

SAVED = "manual.csv"
MAX_ROW = "(max points)"


def manual_items(lab: Lab) -> dict[str, tuple[float, str]]:
    """{key: (points, description)} of the rubric's ``manual:`` section; {} when the lab has none."""
    import yaml

    rubric = lab.grading / "rubric.yaml"
    raw = (yaml.safe_load(rubric.read_text()) or {}).get("manual") if rubric.is_file() else None
    items: dict[str, tuple[float, str]] = {}
    for key, spec in (raw or {}).items():
        spec = spec if isinstance(spec, dict) else {"points": spec}
        try:
            points = float(spec.get("points"))
        except (TypeError, ValueError):
            points = math.nan
        if not points > 0 or key in ("id", "name", "comments"):
            raise UserError(f"{rubric}: manual item {key!r} needs a key other than id/name/comments and points > 0")
        items[str(key)] = (points, str(spec.get("description", "")))
    return items


def read_saved(out: Path) -> tuple[dict[str, float], dict[str, dict[str, object]]]:
    """(max points per item, {id: {item: score, "comments": text}}) kept in ``<out>/manual.csv``."""
    p = out / SAVED
    if not p.is_file():
        return {}, {}
    rows = list(csv.DictReader(io.StringIO(p.read_text(encoding="utf-8"))))
    maxima = {k: float(v) for k, v in (rows[0] if rows and rows[0]["id"] == MAX_ROW else {}).items()
              if k not in ("id", "comments") and v}
    scores = {r["id"]: {k: (float(v) if k in maxima else v) for k, v in r.items() if k != "id" and v}
              for r in rows if r["id"] != MAX_ROW}
    return maxima, scores


def _table(items: dict[str, float], rows: dict[str, dict[str, object]], names: dict[str, str] | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = ["id", *(["name"] if names is not None else []), *items, "comments"]
    w.writerow(cols)
    w.writerow([MAX_ROW, *([""] if names is not None else []), *(f"{p:g}" for p in items.values()), ""])
    for sid, row in rows.items():
        w.writerow([sid, *([names.get(sid, "")] if names is not None else []),
                    *(f"{row[k]:g}" if k in row else "" for k in items), row.get("comments", "")])
    return buf.getvalue()


def sheet_text(items: dict[str, tuple[float, str]], ids: list[str], names: dict[str, str],
               saved: dict[str, dict[str, object]]) -> str:
    """The score sheet: one row per id, prefilled with what was merged before."""
    return _table({k: p for k, (p, _) in items.items()}, {i: saved.get(i, {}) for i in ids}, names)


def parse_sheet(text: str, shown: str, items: dict[str, tuple[float, str]], resolve) -> dict[str, dict[str, object]]:
    """{id: {item: points, "comments": text}} of a filled sheet; ``resolve(name)`` gives the id or None.

    Every problem is one UserError line naming ``shown`` and the line: an unknown column or id, an id
    twice, a score that is not a number from 0 to the item's points."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = [h.strip() for h in next(reader, [])]
    if "id" not in header:
        raise UserError(f"{shown}: the first line must name the columns id, name, the items and comments "
                        f"(make one with scaleout grade-manual sheet)")
    unknown = [h for h in header if h not in ("id", "name", "comments", *items)]
    if unknown:
        raise UserError(f"{shown}: column {unknown[0]!r} is no manual item of this lab; the items are "
                        f"{', '.join(items) or 'none'}")
    got: dict[str, dict[str, object]] = {}
    for line, row in enumerate(reader, 2):
        cells = {h: (row[i].strip() if i < len(row) else "") for i, h in enumerate(header)}
        if not any(cells.values()) or cells["id"] == MAX_ROW:
            continue
        sid = resolve(cells["id"]) if cells["id"] else None
        if sid is None:
            raise UserError(f"{shown} line {line}: unknown id {cells['id']!r}: no graded submission and no roster "
                            f"line has it")
        if sid in got:
            raise UserError(f"{shown} line {line}: {sid!r} has a second row; keep one row per student")
        entry: dict[str, object] = {}
        for key, (points, _) in items.items():
            raw = cells.get(key, "")
            if not raw:
                continue
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            if not 0 <= value <= points:
                raise UserError(f"{shown} line {line}: {key} = {raw!r} for {sid!r} must be a number from 0 to its "
                                f"{points:g} points")
            entry[key] = value
        if cells.get("comments"):
            entry["comments"] = cells["comments"]
        got[sid] = entry
    return got


def merged_text(items: dict[str, tuple[float, str]], saved: dict[str, dict[str, object]],
                new: dict[str, dict[str, object]]) -> str:
    """``<out>/manual.csv`` after a merge: each new non-blank cell replaces the saved one."""
    rows = {sid: dict(row) for sid, row in saved.items()}
    for sid, row in new.items():
        rows.setdefault(sid, {}).update(row)
    return _table({k: p for k, (p, _) in items.items()}, dict(sorted(rows.items())))


def _graded(lab: Lab, grades: Path) -> list[str]:
    ids = sorted(p.parent.name for p in grades.glob("*/results.json")) if grades.is_dir() else []
    if not ids:
        raise UserError(f"{grades}: no graded submissions of {lab.name} there; grade them first "
                        f"(scaleout grade {lab.name.split('-')[0]} SUBMISSIONS --out {grades})")
    return ids


def write_sheet(lab: Lab, grades: Path, dest: Path, force: bool = False) -> str:
    """``scaleout grade-manual sheet``: the score sheet of every graded student; returns what to print."""
    from .gradebook import write_file
    from .roster import saved_roster

    items = manual_items(lab)
    if not items:
        raise UserError(f"{lab.grading / 'rubric.yaml'} has no manual: items; add them to grade {lab.name} by hand")
    ids = _graded(lab, grades)
    if dest.exists() and not force:
        raise UserError(f"{dest} exists: merge it (scaleout grade-manual merge {lab.name} {dest}) or pass --force "
                        f"to write a fresh sheet (it keeps the scores merged so far)")
    roster = saved_roster(grades)
    names = {s.id: s.name for s in roster.students.values()} if roster else {}
    write_file(dest, sheet_text(items, ids, names, read_saved(grades)[1]))
    listed = "; ".join(f"{k} ({p:g} points){': ' + d if d else ''}" for k, (p, d) in items.items())
    return f"score sheet for {len(ids)} students written to {dest}; items: {listed}"


def merge_sheet(lab: Lab, grades: Path, sheet: Path) -> str:
    """``scaleout grade-manual merge``: check the whole sheet, keep its scores, rebuild the gradebook."""
    from .gradebook import rebuild, write_file
    from .roster import saved_roster

    items = manual_items(lab)
    if not items:
        raise UserError(f"{lab.grading / 'rubric.yaml'} has no manual: items; nothing of {lab.name} is graded by hand")
    ids = set(_graded(lab, grades))
    roster = saved_roster(grades)
    try:
        text = sheet.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{sheet}: cannot read the score sheet ({getattr(exc, 'strerror', None) or exc})") from None

    def resolve(name: str) -> str | None:
        if name in ids:
            return name
        return roster.resolve(name) if roster is not None else None

    new = parse_sheet(text, str(sheet), items, resolve)
    write_file(grades / SAVED, merged_text(items, read_saved(grades)[1], new))
    rebuild(grades, lab)
    scored = sum(1 for row in new.values() if any(k in row for k in items))
    return f"merged hand grading of {scored} students from {sheet}; gradebook: {grades / 'gradebook.csv'}"
