"""Notation lint: a symbol of Appendix C used with another meaning in a chapter's prose.

``chapters/notation.yaml`` lists each reserved symbol, its meaning, and optionally

* ``not``: the things it must never count or name (``P: not [device, GPU, ...]`` because P is the number
  of parameters; ``N: not [player, ...]`` because N is the dataset size);
* ``context``: words of which at least one must occur in every paragraph that uses the symbol
  (``\\varepsilon: context [privacy, delta, ...]``: the letter belongs to differential privacy, so a
  paragraph that writes it with none of those words is using it for something else).

The rule, applied to the markdown cells of a py:percent source:

1. **Defined as a forbidden noun.** A symbol is flagged where the prose ties it to one of its ``not``
   nouns: ``$P$ devices``, ``$N = 8$ GPUs``, ``$b$ is the number of bytes``, ``the number of workers $N$``,
   ``devices ($P$)``, ``the inertia weight $w$`` (noun, a naming word such as weight, scale or
   factor, symbol), ``$\\eta$ denotes the
   efficiency``. A leading sign (``$-\\varepsilon$``) counts as the symbol.
2. **Out of context.** A symbol with ``context`` words is flagged in a paragraph (lines between blank
   lines) that uses it and contains none of them.

A chapter may define local symbols of its own, but never one of these with another meaning. Each
finding is one line ``file:line: '<text>': $P$ is the <meaning> (Appendix C); use another symbol ...``.
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
    context: tuple[str, ...] = ()


def _words(entry: dict, key: str, path: Path, name: str) -> tuple[str, ...]:
    value = entry.get(key) or []
    if not isinstance(value, list) or not all(isinstance(n, str) and n.strip() for n in value):
        raise ValueError(f"{path}: '{key}' of symbol {name!r} must be a list of words")
    return tuple(value)


def load_notation(path: Path) -> list[Symbol]:
    """The symbols of ``notation.yaml``; a malformed table is a ValueError naming the entry."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    symbols = []
    for name, entry in (data.get("symbols") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("meaning"), str):
            raise ValueError(f"{path}: symbol {name!r} needs a 'meaning' string")
        unknown = set(entry) - {"meaning", "first_use", "not", "context"}
        if unknown:
            raise ValueError(f"{path}: symbol {name!r} has unknown field(s) {sorted(unknown)}")
        symbols.append(Symbol(str(name), entry["meaning"], _words(entry, "not", path, name),
                              _words(entry, "context", path, name)))
    return symbols


def _noun(words: tuple[str, ...]) -> str:
    return r"(?:" + "|".join(re.escape(w) for w in words) + r")(?:e?s)?\b"


def _math(sym: Symbol) -> str:
    """The symbol alone in inline math, possibly signed or set equal to a value: $P$, $-P$, $P = 8$."""
    return rf"\$\s*[-+]?\s*{re.escape(sym.name)}(?![A-Za-z_^])\s*(?:=\s*[^$]+?)?\$"


def _flags(sym: Symbol) -> int:
    return re.I if not sym.name.isalpha() or len(sym.name) > 1 else 0


# the word between a noun and its symbol in "the inertia weight $w$" (rule 1's last form)
_NAMING = r"(?:weight|scale|factor|coefficient|strength|size|count|number|budget|parameter|term|rate|level)s?"


def _patterns(sym: Symbol) -> list[re.Pattern[str]]:
    noun, math = _noun(sym.never), _math(sym)
    return [re.compile(p, _flags(sym)) for p in (
        rf"{math}\s+(?:\w+\s+)?{noun}",  # $P$ devices, $N = 8$ GPUs, $P$ GPU devices
        rf"{math}\s+(?:is|denotes|stands\s+for|=|:)\s+(?:the\s+|an?\s+)?(?:\w+\s+)?{noun}",  # $\eta$ is the efficiency
        rf"{math},?\s+(?:is|are|denotes|counts|=|:)?\s*(?:the\s+)?(?:total\s+)?(?:number|count)\s+of\s+(?:\w+\s+)?{noun}",
        rf"(?:number|count)\s+of\s+(?:\w+\s+)?{noun},?\s+{math}",  # the number of devices $P$
        rf"{noun}\s*\(\s*{math}\s*\)",  # devices ($P$)
        rf"\b{noun}\s+{_NAMING}\s+{math}",  # the inertia weight $w$, the attack scale $\varepsilon$
    )]


def _any_math(sym: Symbol) -> re.Pattern[str]:
    """The symbol anywhere inside inline or display math."""
    return re.compile(rf"\$[^$]*?{re.escape(sym.name)}(?![A-Za-z])[^$]*?\$")


def _paragraphs(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    out: list[list[tuple[int, str]]] = [[]]
    for line, text in lines:
        if text.strip():
            out[-1].append((line, text))
        elif out[-1]:
            out.append([])
    return [p for p in out if p]


def lint_source(path: Path, symbols: list[Symbol]) -> list[str]:
    """Findings for one chapter or lab source (its markdown cells only), rules 1 and 2 of the module."""
    path = Path(path)
    compiled = [(sym, _patterns(sym)) for sym in symbols if sym.never]
    contextual = [(sym, _any_math(sym), re.compile(r"\b" + _noun(sym.context).replace(")(?:e?s)?", r")\w*"), re.I))
                  for sym in symbols if sym.context]  # a context word starts a word: "privacy", "DP-SGD", "$\delta$"
    found = []
    for cell in split_cells(path.read_text(encoding="utf-8")):
        if cell.kind != "markdown":
            continue
        lines = cell.markdown()
        for line, text in lines:
            for sym, patterns in compiled:
                for pat in patterns:
                    m = pat.search(text)
                    if m:
                        found.append(f"{path.name}:{line}: '{m.group(0)}': ${sym.name}$ is the {sym.meaning} "
                                     f"(Appendix C); use another symbol or the word itself")
                        break
        for para in _paragraphs(lines):
            joined = " ".join(text for _, text in para)
            for sym, uses, context in contextual:
                if context.search(joined):
                    continue
                for line, text in para:
                    m = uses.search(text)
                    if m:
                        found.append(f"{path.name}:{line}: '{m.group(0)}': ${sym.name}$ is the {sym.meaning} "
                                     f"(Appendix C), and this paragraph names none of {list(sym.context)}; "
                                     f"use another symbol")
                        break
    return found
