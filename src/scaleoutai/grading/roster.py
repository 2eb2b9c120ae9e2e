"""Student identity: the one rule that names a submission, and the roster that maps names to students.

The rule (grading/README.md, "Students, late work, hand grading and Canvas"): a notebook's id is its
file stem; a folder of files for one student takes the folder's name; with a roster, whichever of those
names matches a roster ``id``, ``email`` or alias (case-insensitive) gives the roster's ``id``. The id
is a pure function of the path and the roster, so it is the same on every rerun and in every batch shape.

A roster is a CSV with the columns ``id,name,email`` and optionally ``aliases`` (names separated by ``;``
or spaces) and the Canvas columns ``canvas_id``, ``sis_user_id``, ``sis_login_id``, ``section``; other
columns are ignored. A copy is kept as ``<out>/roster.csv`` so later commands know the class.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError

REQUIRED = ("id", "name", "email")
CANVAS = ("canvas_id", "sis_user_id", "sis_login_id", "section")
SAVED = "roster.csv"
# names the grader writes itself: never a student's id
RESERVED = {"gradebook.csv", "gradebook.html", "gradebook", "submissions", "roster.csv", "manual.csv", "late.json",
            "similarity"}


def clean_id(name: str) -> str:
    """A file or folder name made safe as a results folder: letters, digits, '.', '_' and '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "submission"


def _key(name: str) -> str:
    return clean_id(name.strip()).lower()


@dataclass
class Student:
    id: str
    name: str = ""
    email: str = ""
    aliases: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)  # the Canvas columns the roster gives


@dataclass
class Roster:
    students: dict[str, Student]
    path: str = ""  # as the user typed it, for messages
    _index: dict[str, str] = field(default_factory=dict)

    def resolve(self, *names: str) -> str | None:
        """The roster id the first matching name (id, email or alias, any case) gives; None if none does."""
        for n in names:
            hit = self._index.get(_key(n)) or self._index.get(n.strip().lower())
            if hit:
                return hit
        return None

    def text(self) -> str:
        cols = [*REQUIRED, "aliases", *CANVAS]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for s in self.students.values():
            w.writerow([s.id, s.name, s.email, ";".join(s.aliases), *(s.extra.get(c, "") for c in CANVAS)])
        return buf.getvalue()


def parse_roster(text: str, where: str) -> Roster:
    """Read a roster's CSV text; every problem is one UserError line naming ``where`` and the line."""
    rows = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = [h.strip().lower() for h in next(rows, [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise UserError(f"{where}: the first line must name the columns id,name,email (missing {', '.join(missing)}); "
                        f"aliases, canvas_id, sis_user_id, sis_login_id and section are optional")
    col = {h: i for i, h in enumerate(header)}
    roster = Roster({}, where)

    def claim(name: str, sid: str, line: int) -> None:
        k = name.strip().lower() if "@" in name else _key(name)
        other = roster._index.get(k)
        if other and other != sid:
            raise UserError(f"{where} line {line}: {name!r} already names {other!r}; give each name to one student")
        roster._index[k] = sid

    for line, row in enumerate(rows, 2):
        if not any(c.strip() for c in row):
            continue
        get = {h: (row[i].strip() if i < len(row) else "") for h, i in col.items()}
        sid = get["id"]
        if not sid:
            raise UserError(f"{where} line {line}: the id is empty; every student needs one")
        if clean_id(sid) != sid or sid.lower() in RESERVED:
            raise UserError(f"{where} line {line}: id {sid!r} may hold only letters, digits, '.', '_' and '-' "
                            f"(and not be one of {', '.join(sorted(RESERVED))})")
        if sid in roster.students:
            raise UserError(f"{where} line {line}: id {sid!r} appears twice; one line per student")
        aliases = [a for a in re.split(r"[;\s]+", get.get("aliases", "")) if a]
        roster.students[sid] = Student(sid, get["name"], get["email"], aliases,
                                       {c: get[c] for c in CANVAS if get.get(c)})
        for name in (sid, get["email"], *aliases):
            if name:
                claim(name, sid, line)
    if not roster.students:
        raise UserError(f"{where}: no students; add one line per student under id,name,email")
    return roster


def load_roster(path: Path | str) -> Roster:
    """The roster at ``path`` (as typed, for the messages)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such roster; give a CSV with the columns id,name,email") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the roster ({getattr(exc, 'strerror', None) or exc})") from None
    return parse_roster(text, str(path))


def saved_roster(out: Path) -> Roster | None:
    """The roster kept in a results folder by an earlier ``--roster``; None when there is none."""
    p = out / SAVED
    return parse_roster(p.read_text(encoding="utf-8"), str(p)) if p.is_file() else None


def report(roster: Roster, graded: list[str]) -> list[str]:
    """One line for the students with no result and one for results no roster line names (empty when none)."""
    have = set(graded)
    missing = [s for s in roster.students if s not in have]
    unknown = sorted(have - set(roster.students))
    lines = []
    if missing:
        lines.append(f"missing ({len(missing)} in {roster.path} with no graded submission): {', '.join(missing)}")
    if unknown:
        lines.append(f"unknown ({len(unknown)} graded but not in {roster.path}; add them or an alias): "
                     f"{', '.join(unknown)}")
    return lines
