"""Notation lint: a symbol of Appendix C used with another meaning in a chapter's prose.

``chapters/notation.yaml`` lists each symbol, its meaning and the things it must never count
(``P: not [device, GPU, ...]`` because P is the number of parameters). The lint reads the markdown of a
py:percent source and flags the places where such a symbol is *defined* as one of those things:

    $P$ devices        $N = 8$ GPUs        $b$ is the number of bytes        devices ($P$)
    the number of workers $N$              $\\eta$ denotes the efficiency

Each finding is one line ``file:line: '$P$ devices': P is <meaning> (Appendix C); write ...``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .conventions import split_cells


@dataclass(frozen=True)
class Symbol:
    name: str  # as written inside $...$, e.g. "P" or "\\eta"
    meaning: str
    never: tuple[str, ...]


def load_notation(path: Path) -> list[Symbol]:
    """The symbols of ``notation.yaml``; a malformed table is a ValueError naming the entry."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    symbols = []
    for name, entry in (data.get("symbols") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("meaning"), str):
            raise ValueError(f"{path}: symbol {name!r} needs a 'meaning' string")
        never = entry.get("not") or []
        if not isinstance(never, list) or not all(isinstance(n, str) for n in never):
            raise ValueError(f"{path}: 'not' of symbol {name!r} must be a list of words")
        symbols.append(Symbol(str(name), entry["meaning"], tuple(never)))
    return symbols


def _noun(words: tuple[str, ...]) -> str:
    return r"(?:" + "|".join(re.escape(w) for w in words) + r")(?:e?s)?\b"


def _patterns(sym: Symbol) -> list[re.Pattern[str]]:
    s = re.escape(sym.name)
    noun = _noun(sym.never)
    math = rf"\$\s*{s}\s*(?:=\s*[^$]+?)?\$"  # $P$ or $P = 8$
    return [re.compile(p, re.I if not sym.name.isalpha() or len(sym.name) > 1 else 0) for p in (
        rf"{math}\s+(?:\w+\s+)?{noun}",  # $P$ devices, $N = 8$ GPUs, $P$ GPU devices
        rf"{math}\s+(?:is|denotes|stands\s+for|=|:)\s+(?:the\s+|an?\s+)?(?:\w+\s+)?{noun}",  # $\eta$ is the efficiency
        rf"{math},?\s+(?:is|are|denotes|counts|=|:)?\s*(?:the\s+)?(?:total\s+)?(?:number|count)\s+of\s+(?:\w+\s+)?{noun}",
        rf"(?:number|count)\s+of\s+(?:\w+\s+)?{noun},?\s+{math}",  # the number of devices $P$
        rf"{noun}\s*\(\s*{math}\s*\)",  # devices ($P$)
    )]


def lint_source(path: Path, symbols: list[Symbol]) -> list[str]:
    """Findings for one chapter or lab source (its markdown cells only)."""
    path = Path(path)
    compiled = [(sym, _patterns(sym)) for sym in symbols if sym.never]
    found = []
    for cell in split_cells(path.read_text(encoding="utf-8")):
        if cell.kind != "markdown":
            continue
        for line, text in cell.markdown():
            for sym, patterns in compiled:
                for pat in patterns:
                    m = pat.search(text)
                    if m:
                        found.append(f"{path.name}:{line}: '{m.group(0)}': ${sym.name}$ is the {sym.meaning} "
                                     f"(Appendix C); use another symbol or the word itself")
                        break
    return found
