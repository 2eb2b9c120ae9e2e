"""The five course paths of the preface (Section 0.5), one YAML file each under ``syllabi/``.

A path is ``name``, ``title``, ``focus`` and ``weeks``: ``{week, chapters, planned_chapters, lab, reading,
capstone}``. ``check_path`` holds a path to the preface's rules: weeks numbered 1..n with 13 <= n <= 15,
week 1 in Part I (a chapter 1-5), every listed chapter and lab present in the checkout, chapters 36-40
(not written yet) only under ``planned_chapters``, and the last weeks the Chapter 41 capstone.
``format_path`` is what ``scaleout notebooks list --path NAME`` prints.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .glossary import PLANNED, chapter_folders, chapter_titles

ORDER = ("big-data-algorithms", "distributed-ml", "parallel-deep-learning", "multi-agent-systems", "ai-infrastructure")
CAPSTONE = 41
SEMESTER = range(13, 16)  # "a thirteen-to-fifteen week semester"


@dataclass(frozen=True)
class Week:
    week: int
    chapters: tuple[int, ...]
    planned: tuple[int, ...] = ()
    lab: str | None = None
    reading: str = ""
    capstone: bool = False


@dataclass(frozen=True)
class CoursePath:
    name: str
    title: str
    focus: str
    weeks: tuple[Week, ...]
    file: Path | None = None

    def chapters(self) -> list[int]:
        """The path's available chapters in the order first met (planned ones excluded)."""
        seen: list[int] = []
        for w in self.weeks:
            seen += [c for c in w.chapters if c not in seen]
        return seen


def _ints(value: object, where: str, key: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{where}: '{key}' must be a list of chapter numbers")
    return tuple(value)


def load_path(file: Path) -> CoursePath:
    """One path file; a malformed file is one ValueError line naming the week or field."""
    import yaml

    file = Path(file)
    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("weeks"), list) or not data["weeks"]:
        raise ValueError(f"{file}: expected 'name', 'title', 'focus' and a non-empty 'weeks:' list")
    for key in ("name", "title", "focus"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ValueError(f"{file}: '{key}' must be a non-empty string")
    if data["name"] != file.stem:
        raise ValueError(f"{file}: 'name: {data['name']}' must equal the file name '{file.stem}'")
    weeks = []
    for i, w in enumerate(data["weeks"], 1):
        where = f"{file}: week entry {i}"
        if not isinstance(w, dict) or not isinstance(w.get("week"), int):
            raise ValueError(f"{where}: needs 'week: N'")
        unknown = set(w) - {"week", "chapters", "planned_chapters", "lab", "reading", "capstone"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
        lab, capstone = w.get("lab"), w.get("capstone", False)
        if lab is not None and not isinstance(lab, str):
            raise ValueError(f"{where}: 'lab' must be a lab folder name such as lab04-ring-allreduce")
        if not isinstance(capstone, bool):
            raise ValueError(f"{where}: 'capstone' must be true or false")
        weeks.append(Week(w["week"], _ints(w.get("chapters"), where, "chapters"),
                          _ints(w.get("planned_chapters"), where, "planned_chapters"), lab,
                          str(w.get("reading") or ""), capstone))
    return CoursePath(data["name"], data["title"], data["focus"], tuple(weeks), file)


def path_files(root: Path) -> list[Path]:
    """The path files under ``root``/syllabi, the preface's five first in its order."""
    files = sorted((Path(root) / "syllabi").glob("*.yaml"))
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(files, key=lambda f: (rank.get(f.stem, len(ORDER)), f.stem))


def load_paths(root: Path) -> list[CoursePath]:
    return [load_path(f) for f in path_files(root)]


def find_path(name: str, root: Path) -> CoursePath:
    """The path called ``name``; an unknown name is a ValueError listing the choices."""
    files = {f.stem: f for f in path_files(root)}
    if name not in files:
        choices = ", ".join(files) or f"none (no syllabi/*.yaml under {root})"
        raise ValueError(f"unknown course path {name!r}; choose one of: {choices}")
    return load_path(files[name])


def check_path(path: CoursePath, root: Path) -> list[str]:
    """Every way ``path`` breaks the preface's rules or names something missing, one line each."""
    root = Path(root)
    have = chapter_folders(root)
    where = path.file.name if path.file else path.name
    problems: list[str] = []
    numbers = [w.week for w in path.weeks]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"{where}: weeks must be numbered 1..{len(numbers)} in order; found {numbers}")
    if len(numbers) not in SEMESTER:
        problems.append(f"{where}: {len(numbers)} weeks; a semester path has 13 to 15 (preface, Section 0.5)")
    if not any(1 <= c <= 5 for c in path.weeks[0].chapters):
        problems.append(f"{where}: week 1 must start in Part I (a chapter 1-5); it lists {list(path.weeks[0].chapters)}")
    last = path.weeks[-1]
    if CAPSTONE not in last.chapters or not last.capstone:
        problems.append(f"{where}: the last week must be a capstone week on Chapter {CAPSTONE} (capstone: true)")
    for w in path.weeks:
        if not w.chapters and not w.planned:
            problems.append(f"{where}: week {w.week} lists no chapter")
        if w.capstone != (CAPSTONE in w.chapters):
            problems.append(f"{where}: week {w.week}: 'capstone: true' goes with Chapter {CAPSTONE} and only with it")
        for c in w.chapters:
            if c not in have:
                hint = "; list it under planned_chapters" if c in PLANNED else ""
                problems.append(f"{where}: week {w.week}: chapter {c} does not exist (no chapters/{c:02d}-* folder){hint}")
        problems += [f"{where}: week {w.week}: planned_chapters is only for chapters 36-40, not {c}"
                     for c in w.planned if c not in PLANNED]
        problems += [f"{where}: week {w.week}: chapter {c} exists now (chapters/{c:02d}-*): move it from "
                     f"planned_chapters to chapters" for c in w.planned if c in PLANNED and c in have]
        if w.lab is not None and not (root / "labs" / w.lab).is_dir():
            problems.append(f"{where}: week {w.week}: lab {w.lab!r} does not exist (no labs/{w.lab}/ folder)")
    return problems


def format_path(path: CoursePath, root: Path) -> str:
    """The path week by week: chapters with their titles, planned chapters, the lab and the reading."""
    titles = chapter_titles(root)
    lines = [f"{path.title} ({path.name}): {len(path.weeks)} weeks", f"focus: {path.focus}", ""]
    for w in path.weeks:
        items = [f"Chapter {c}. {titles.get(c, '(missing)')}" for c in w.chapters]
        items += [f"Chapter {c}. {titles[c]}" if c in titles else f"Chapter {c} (planned, not written yet)"
                  for c in w.planned]
        items += [f"lab: {w.lab}"] if w.lab else []
        items += [f"reading: {w.reading}"] if w.reading else []
        head = f"week {w.week:>2}" + (" [capstone]" if w.capstone else "")
        lines.append(f"{head:<20}{items[0]}")
        lines += [f"{'':<20}{item}" for item in items[1:]]
    return "\n".join(lines)
