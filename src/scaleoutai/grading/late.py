"""Due dates and the late policy: late days from submission times, and the penalty they cost.

A policy file (YAML) holds ``due`` (ISO 8601; without a UTC offset it is the grading machine's local
time), ``per_day`` (percent of the points per late day), ``grace_minutes``, ``cap`` (the largest penalty
in percent) and ``extensions`` (a CSV ``id,due`` or ``id,days``, relative to the policy file). The rule:

    lateness = submitted - deadline (the student's extension, else ``due``)
    days     = 0 if lateness <= grace else ceil(lateness / 24 h)       (counted from the deadline)
    percent  = min(days * per_day, cap)

and the penalty is taken after the autograded and hand-graded points are added. A submission's time is
its notebook's modification time, or the ``id,submitted`` CSV given with ``--times``.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from ..errors import UserError

SAVED = "late.json"
DAY = 86400.0


def parse_time(value: object, where: str) -> datetime:
    """An aware datetime from ISO 8601 text, a YAML timestamp or a date (midnight); local time if naive."""
    if isinstance(value, datetime):
        t = value
    elif isinstance(value, date):
        t = datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        try:
            t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise UserError(f"{where}: {text!r} is not a date and time; write it as 2026-12-05T23:59:00+00:00") \
                from None
    return t if t.tzinfo else t.astimezone()


@dataclass
class LatePolicy:
    due: datetime
    per_day: float = 10.0
    grace_minutes: float = 0.0
    cap: float = 100.0
    extensions: dict[str, datetime] = field(default_factory=dict)

    def deadline(self, sid: str) -> datetime:
        return self.extensions.get(sid, self.due)

    def assess(self, sid: str, submitted: datetime) -> dict:
        """{"submitted", "deadline", "extension", "days", "percent"} for one student's submission time."""
        deadline = self.deadline(sid)
        lateness = (submitted - deadline).total_seconds()
        days = 0 if lateness <= self.grace_minutes * 60 else math.ceil(lateness / DAY)
        return {"submitted": submitted.astimezone(timezone.utc).isoformat(),
                "deadline": deadline.astimezone(timezone.utc).isoformat(), "extension": sid in self.extensions,
                "days": days, "percent": min(days * self.per_day, self.cap)}

    def to_json(self) -> str:
        return json.dumps({"due": self.due.isoformat(), "per_day": self.per_day, "grace_minutes": self.grace_minutes,
                           "cap": self.cap, "extensions": {k: v.isoformat() for k, v in self.extensions.items()}},
                          indent=1)

    def describe(self) -> str:
        grace = f", {self.grace_minutes:g} minutes of grace" if self.grace_minutes else ""
        return f"{self.per_day:g}% per day late, at most {self.cap:g}%{grace}"


def _number(raw: dict, key: str, default: float, where: str, top: float = math.inf) -> float:
    value = raw.get(key, default)
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not 0 <= x <= top:
        raise UserError(f"{where}: {key} must be a number from 0 to {top:g}, got {value!r}")
    return x


def _read_csv(path: Path, shown: str, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{shown}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip().lower() for h in reader.fieldnames or []]
    if "id" not in header or not set(columns) & set(header):
        raise UserError(f"{shown}: the first line must name the columns id,{' or '.join(columns)}")
    return [(n, {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()})
            for n, row in enumerate(reader, 2) if any((v or "").strip() for v in row.values())]


def _student(sid: str, roster, shown: str, line: int) -> str:
    if not sid:
        raise UserError(f"{shown} line {line}: the id is empty")
    if roster is None:
        return sid
    hit = roster.resolve(sid)
    if hit is None:
        raise UserError(f"{shown} line {line}: {sid!r} is not in the roster {roster.path}")
    return hit


def load_policy(path: Path | str, roster=None) -> LatePolicy:
    """The policy at ``path`` (YAML); extension ids go through ``roster`` when one is given."""
    import yaml

    shown = str(path)
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{shown}: no such late policy; give a YAML file with due, per_day, grace_minutes, cap") \
            from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"{shown}: cannot read the late policy ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict) or "due" not in raw:
        raise UserError(f"{shown}: a late policy needs at least 'due: 2026-12-05T23:59:00+00:00'")
    unknown = sorted(set(raw) - {"due", "per_day", "grace_minutes", "cap", "extensions"})
    if unknown:
        raise UserError(f"{shown}: unknown key {unknown[0]!r}; use due, per_day, grace_minutes, cap, extensions")
    policy = LatePolicy(parse_time(raw["due"], f"{shown}: due"), _number(raw, "per_day", 10, shown, 100),
                        _number(raw, "grace_minutes", 0, shown), _number(raw, "cap", 100, shown, 100))
    if raw.get("extensions"):
        ext = Path(path).parent / str(raw["extensions"])
        for line, row in _read_csv(ext, str(ext), ("due", "days")):
            where = f"{ext} line {line}"
            sid = _student(row.get("id", ""), roster, str(ext), line)
            if row.get("due"):
                policy.extensions[sid] = parse_time(row["due"], where)
            else:
                try:
                    days = float(row.get("days", ""))
                except ValueError:
                    raise UserError(f"{where}: days must be a number, got {row.get('days')!r}") from None
                policy.extensions[sid] = policy.due + timedelta(days=days)
    return policy


def saved_policy(out: Path) -> LatePolicy | None:
    """The policy kept in a results folder by an earlier ``--late-policy``; None when there is none."""
    p = out / SAVED
    if not p.is_file():
        return None
    raw = json.loads(p.read_text())
    return LatePolicy(parse_time(raw["due"], str(p)), raw["per_day"], raw["grace_minutes"], raw["cap"],
                      {k: parse_time(v, str(p)) for k, v in raw.get("extensions", {}).items()})


def load_times(path: Path | str, roster=None) -> dict[str, datetime]:
    """{id: submission time} from a CSV with the columns id,submitted (ids through ``roster`` if given)."""
    shown = str(path)
    if not Path(path).is_file():
        raise UserError(f"{shown}: no such file of submission times; give a CSV with the columns id,submitted")
    return {_student(row.get("id", ""), roster, shown, line): parse_time(row.get("submitted", ""),
                                                                          f"{shown} line {line}")
            for line, row in _read_csv(Path(path), shown, ("submitted",))}


def mtime(path: Path) -> datetime:
    """A file's modification time, as an aware UTC datetime."""
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)


def describe(late: dict) -> str:
    """One line a student reads: when, how late, what it costs."""
    when = datetime.fromisoformat(late["submitted"]).strftime("%Y-%m-%d %H:%M UTC")
    due = datetime.fromisoformat(late["deadline"]).strftime("%Y-%m-%d %H:%M UTC")
    ext = " (your extension)" if late.get("extension") else ""
    if not late["days"]:
        return f"Submitted {when}, on time for the deadline {due}{ext}."
    return (f"Submitted {when}: {late['days']} day{'s' * (late['days'] != 1)} after the deadline {due}{ext}, "
            f"a late penalty of {late['percent']:g}% of your points.")
