"""Appendix C's glossary (``chapters/glossary.yaml``): load it, check it against the course, render it.

Each term has a definition, an ``owner`` (the chapter 1-41, or appendix letter A-D, that develops it),
optional ``aliases``, ``symbol`` (a key of ``chapters/notation.yaml``), ``see`` (other terms) and
``planned: true`` (only for the case-study chapters 36-40, not written yet). ``check_glossary`` returns
one line per problem: an owner with no chapter folder, a name defined twice (compared without case and
punctuation, aliases included), a ``see`` to no term, a symbol missing from the notation table, or a
symbol whose meaning there contradicts the term. ``render_markdown`` writes the glossary by chapter.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

APPENDICES = ("A", "B", "C", "D")
PLANNED = range(36, 41)  # Part VIII's case studies: the only chapters a term may own before they exist
_TITLE = re.compile(r"^# # (?:Chapter (\d+)|Appendix ([A-D]))\. (.+)$")
_FOLDER = re.compile(r"^(?:(\d\d)|appendix-([a-d]))-")
# words too generic to link a term to a symbol's meaning ("number of ...", "size", "model")
_GENERIC = {"the", "of", "and", "or", "in", "on", "for", "to", "a", "an", "per", "one", "each", "number",
            "count", "total", "size", "model", "also", "written", "by", "with", "that", "is"}


@dataclass(frozen=True)
class Term:
    term: str
    definition: str
    owner: int | str  # chapter number or appendix letter
    aliases: tuple[str, ...] = ()
    symbol: str | None = None
    see: tuple[str, ...] = ()
    planned: bool = False


def normalize(name: str) -> str:
    """The key two names are compared by: lower case, letters and digits only ("All-Reduce" == "allreduce")."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _strings(entry: dict, key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}: '{key}' must be a list of names")
    return tuple(value)


def load_glossary(path: Path) -> list[Term]:
    """The terms of a glossary file; a malformed entry is one ValueError line naming it."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    entries = data.get("terms") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a top-level 'terms:' list of entries")
    terms = []
    for i, entry in enumerate(entries, 1):
        name = entry.get("term") if isinstance(entry, dict) else None
        where = f"{path}: entry {i} ({name!r})"
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{path}: entry {i} needs a 'term: NAME'")
        if not isinstance(entry.get("definition"), str) or len(entry["definition"].split()) < 5:
            raise ValueError(f"{where}: needs a 'definition' of at least a sentence")
        owner = entry.get("owner")
        if isinstance(owner, bool) or not (isinstance(owner, int) or owner in APPENDICES):
            raise ValueError(f"{where}: 'owner' must be a chapter number or an appendix letter A-D, got {owner!r}")
        symbol, planned = entry.get("symbol"), entry.get("planned", False)
        if symbol is not None and not isinstance(symbol, str):
            raise ValueError(f"{where}: 'symbol' must be a notation.yaml key such as 'K' or '\\eta'")
        if not isinstance(planned, bool):
            raise ValueError(f"{where}: 'planned' must be true or false")
        unknown = set(entry) - {"term", "definition", "owner", "aliases", "symbol", "see", "planned"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
        terms.append(Term(name, " ".join(entry["definition"].split()), owner, _strings(entry, "aliases", where),
                          symbol, _strings(entry, "see", where), planned))
    return terms


def chapter_folders(root: Path) -> dict[int | str, Path]:
    """{chapter number or appendix letter: folder} of the chapters that exist under ``root``/chapters."""
    found: dict[int | str, Path] = {}
    chapters = Path(root) / "chapters"
    for folder in sorted(chapters.iterdir()) if chapters.is_dir() else []:
        m = _FOLDER.match(folder.name)
        if folder.is_dir() and m:
            found[int(m[1]) if m[1] else m[2].upper()] = folder
    return found


def chapter_titles(root: Path) -> dict[int | str, str]:
    """{number or letter: title} from each source's '# # Chapter NN. Title' line (the folder name if none)."""
    titles: dict[int | str, str] = {}
    for key, folder in chapter_folders(root).items():
        source = folder / f"{folder.name}.py"
        lines = source.read_text(encoding="utf-8").splitlines() if source.is_file() else []
        title = next((m[3].strip() for m in map(_TITLE.match, lines) if m), folder.name)
        titles[key] = title
    return titles


def notation_table(path: Path) -> dict[str, dict]:
    """{symbol: {meaning, first_use, not}} of ``chapters/notation.yaml``."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return {str(k): v for k, v in (data.get("symbols") or {}).items()}


def _words(text: str) -> set[str]:
    """Content words, crudely singular ("workers" -> "worker"), for comparing a term with a meaning."""
    out = set()
    for w in re.findall(r"[a-z]+", text.lower()):
        if w not in _GENERIC and len(w) > 2:
            out.add(w[:-1] if w.endswith("s") and len(w) > 3 and not w.endswith("ss") else w)
    return out


def _owner_problem(t: Term, chapters: dict[int | str, Path]) -> str | None:
    name = f"chapter {t.owner}" if isinstance(t.owner, int) else f"appendix {t.owner}"
    if t.owner in chapters:
        return f"{t.term!r}: {name} exists now; remove 'planned: true'" if t.planned else None
    if t.planned and isinstance(t.owner, int) and t.owner in PLANNED:
        return None
    if t.planned:
        return f"{t.term!r}: 'planned: true' is only for chapters 36-40, and {name} is not one of them"
    where = f"chapters/{t.owner:02d}-*" if isinstance(t.owner, int) else f"chapters/appendix-{t.owner.lower()}-*"
    return (f"{t.term!r}: owner {name} does not exist (no {where} folder); link an existing chapter"
            + (", or mark a chapter 36-40 'planned: true'" if isinstance(t.owner, int) else ""))


def check_glossary(terms: list[Term], root: Path, notation: dict[str, dict] | None = None) -> list[str]:
    """Every problem of the glossary against the chapters under ``root`` and the notation table, one line each."""
    root = Path(root)
    chapters = chapter_folders(root)
    table = notation if notation is not None else notation_table(root / "chapters" / "notation.yaml")
    problems: list[str] = []
    seen: dict[str, str] = {}
    for t in terms:
        owner = _owner_problem(t, chapters)
        if owner:
            problems.append(owner)
        for name in (t.term, *t.aliases):
            key = normalize(name)
            if key in seen and seen[key] == t.term:
                problems.append(f"{t.term!r}: alias {name!r} only repeats the term's own name; drop it")
            elif key in seen:
                problems.append(f"{t.term!r}: {name!r} is already defined by {seen[key]!r} (names compare "
                                f"without case or punctuation, aliases included); keep one entry")
            else:
                seen[key] = t.term
        if t.symbol is not None:
            entry = table.get(t.symbol)
            if entry is None:
                problems.append(f"{t.term!r}: symbol {t.symbol!r} is not in chapters/notation.yaml; add it there "
                                f"or drop 'symbol:'")
                continue
            mine, meaning = _words(" ".join((t.term, *t.aliases))), str(entry.get("meaning", ""))
            clash = mine & _words(" ".join(entry.get("not") or []))
            if clash or not mine & _words(meaning):
                why = f"never counts {', '.join(sorted(clash))}" if clash else "does not name this term"
                problems.append(f"{t.term!r}: symbol {t.symbol} means '{meaning}' in chapters/notation.yaml and "
                                f"{why}; fix 'symbol:' or the term")
    for t in terms:
        problems += [f"{t.term!r}: 'see: {s}' names no term of the glossary" for s in t.see if normalize(s) not in seen]
    return problems


def _owner_key(owner: int | str) -> tuple[int, int | str]:
    return (0, owner) if isinstance(owner, int) else (1, owner)


def render_markdown(terms: list[Term], titles: dict[int | str, str] | None = None, level: int = 3) -> str:
    """The glossary by owning chapter (chapters in order, then appendices), terms alphabetical within each."""
    titles = titles or {}
    lines: list[str] = []
    for owner in sorted({t.owner for t in terms}, key=_owner_key):
        label = f"Chapter {owner}" if isinstance(owner, int) else f"Appendix {owner}"
        title = titles.get(owner)
        lines += [f"{'#' * level} {label}. {title}" if title else f"{'#' * level} {label} (planned)", ""]
        for t in sorted((t for t in terms if t.owner == owner), key=lambda t: normalize(t.term)):
            extra = [f"also {', '.join(t.aliases)}"] if t.aliases else []
            extra += [f"symbol ${t.symbol}$"] if t.symbol else []
            see = f" *See:* {', '.join(t.see)}." if t.see else ""
            lines.append(f"- **{t.term}**{' (' + '; '.join(extra) + ')' if extra else ''}: {t.definition}{see}")
        lines.append("")
    return "\n".join(lines)


def render_notation(table: dict[str, dict]) -> str:
    """The notation table as markdown: symbol, meaning, first use, and what it must never count."""
    rows = ["| symbol | meaning | first use | never counts |", "|---|---|---|---|"]
    rows += [f"| ${name}$ | {entry['meaning']} | {entry.get('first_use', '')} | {', '.join(entry.get('not') or [])} |"
             for name, entry in table.items()]
    return "\n".join(rows)
