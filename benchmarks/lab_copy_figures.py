"""How much of each lab's reference solution a student could copy from the student edition.

    python benchmarks/lab_copy_figures.py               # a table per lab
    python benchmarks/lab_copy_figures.py --markdown    # the same table for grading/README.md
    python benchmarks/lab_copy_figures.py --lab lab04   # one lab

For every lab, the solution lines are the non-blank lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` in ``labs/<lab>/<lab>.py``; the student edition is ``src/scaleoutai/**/*.py`` and
``chapters/**/*.py``. A line is *verbatim* when, whitespace normalised, it is a line of the edition, and
*similar* when it is verbatim or its tokens, normalised as ``scaleout grade similarity`` does (identifiers
``V``, strings ``S``, numbers ``N``; keywords, builtins and attribute names kept), have a difflib ratio of
at least 0.75 with those of some edition line. A line of *logic* has at least 5 such tokens and is not an
import or a docstring: the lines worth copying. *Runs* is the share of the solution's tokens inside runs
of 25 or more normalised tokens that the edition also holds: what ``scaleout grade similarity`` flags
(the "all labs" row weighs each lab's by its lines). *Similar blocks* is the share of solution lines
inside a window of 5 consecutive non-blank lines whose normalised tokens have a difflib ratio of at least
0.75 with those of 5 consecutive non-blank lines of one edition file: an adapted passage, not a common
line (the measure the lab targets of ``grading/README.md`` use for "similar").

The last row is a baseline: the same figures for all lines of three standard-library modules (json,
argparse, difflib) that no one copied from the edition. Line by line, renamed code is similar to
something almost always; read the verbatim, logic and runs columns against that row.
"""
from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scaleoutai.grading.labs import BEGIN, END, find_lab, list_labs  # noqa: E402
from scaleoutai.grading.similarity import edition_files, edition_share, normalise  # noqa: E402

RATIO = 0.75
WINDOW = 5  # lines in a passage compared as one
BINS = 64  # token counts hashed into 64 bins: a cheap upper bound of difflib's ratio (quick_ratio)
LOGIC = 5


def _squash(line: str) -> str:
    return " ".join(line.split())


def signatures(text: str) -> dict[int, tuple[str, ...]]:
    """line -> its normalised tokens (NEWLINE, INDENT and DEDENT left out)."""
    out: dict[int, list[str]] = {}
    for tok, ln in normalise(text):
        if tok not in (";", "{", "}"):
            out.setdefault(ln, []).append(tok)
    return {ln: tuple(t) for ln, t in out.items()}


class Edition:
    """Every edition line, whitespace normalised, and every normalised line grouped by length."""

    def __init__(self, root: Path):
        self.lines: set[str] = set()
        sigs: set[tuple[str, ...]] = set()
        wins: set[tuple[str, ...]] = set()
        for f in edition_files(root):
            text = f.read_text(errors="replace")
            self.lines.update(_squash(ln) for ln in text.splitlines())
            by_line = signatures(text)
            sigs.update(by_line.values())
            wins.update(windows([by_line[n] for n in sorted(by_line) if by_line[n]]))
        self.vocab: dict[str, str] = {}
        self.sigs = {s for s in sigs if s}
        self.line_index = _Index([self.encode(s) for s in self.sigs])
        self.win_index = _Index([self.encode(w) for w in wins if w])

    def encode(self, sig: tuple[str, ...]) -> str:
        """One character per token, so difflib compares token sequences."""
        return "".join(self.vocab.setdefault(t, chr(0x100 + len(self.vocab))) for t in sig)

    @staticmethod
    def counts(enc: str) -> np.ndarray:
        c = np.zeros(BINS, np.int16)
        for ch in enc:
            c[zlib.crc32(ch.encode()) % BINS] += 1
        return c

    def similar(self, sig: tuple[str, ...]) -> bool:
        return sig in self.sigs or self.line_index.near(self.encode(sig))

    def similar_window(self, win: tuple[str, ...]) -> bool:
        return bool(win) and self.win_index.near(self.encode(win))


def windows(sigs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The token sequences of every WINDOW consecutive lines (a shorter list: itself, whole)."""
    if len(sigs) <= WINDOW:
        return [sum(sigs, ())]
    return [sum(sigs[i:i + WINDOW], ()) for i in range(len(sigs) - WINDOW + 1)]


class _Index:
    """Encoded token sequences sorted by length, with hashed token counts for a cheap ratio bound."""

    def __init__(self, enc: list[str]):
        self.enc = enc = sorted(enc, key=len)
        self.lens = np.array([len(e) for e in enc])
        self.bins = np.stack([Edition.counts(e) for e in enc]) if enc else np.zeros((0, BINS), np.int16)

    def near(self, a: str) -> bool:
        """Some sequence with a difflib ratio >= RATIO with ``a``."""
        n = len(a)
        # ratio = 2M / (n + m) with M <= min(n, m): only lengths m in [0.6 n, n / 0.6] can reach 0.75
        lo, hi = np.searchsorted(self.lens, 0.6 * n - 1e-9), np.searchsorted(self.lens, n / 0.6 + 1e-9, "right")
        if lo >= hi:
            return False
        bound = 2 * np.minimum(self.bins[lo:hi], Edition.counts(a)).sum(1) / (n + self.lens[lo:hi])
        sm = difflib.SequenceMatcher(None, autojunk=False)
        sm.set_seq2(a)
        for i in np.argsort(-bound, kind="stable"):
            if bound[i] < RATIO:
                return False
            sm.set_seq1(self.enc[lo + i])
            if sm.quick_ratio() >= RATIO and sm.ratio() >= RATIO:  # the exact multiset bound first
                return True
        return False


@dataclass
class Row:
    lab: str
    lines: int
    verbatim: float
    similar: float
    logic: int
    logic_verbatim: float
    logic_similar: float
    runs: float
    blocks: float = 0.0  # share of lines inside a similar WINDOW-line passage


def solution_blocks(text: str) -> list[list[int]]:
    """1-based numbers of the non-blank lines of each solution block."""
    out: list[list[int]] = []
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith(BEGIN) or s.startswith(END):
            inside = s.startswith(BEGIN)
            out += [[]] if inside else []
        elif inside and s:
            out[-1].append(n)
    return out


def measure(name: str, text: str, blocks: list[list[int]], ed: Edition) -> Row:
    """The figures for the lines ``blocks`` of ``text``."""
    src, sigs = text.splitlines(), signatures(text)
    runs = edition_share([textwrap.dedent("\n".join(src[n - 1] for n in b)) for b in blocks], ROOT)
    verb, sim, logic = [], [], []
    in_block: set[int] = set()
    for b in blocks:
        nums = [n for n in b if sigs.get(n)]
        for i, win in enumerate(windows([sigs[n] for n in nums])):
            if ed.similar_window(win):
                in_block.update(nums[i:i + WINDOW])
    for n in (n for b in blocks for n in b):
        line, sig = _squash(src[n - 1]), sigs.get(n, ())
        verb.append(line in ed.lines)
        sim.append(verb[-1] or (bool(sig) and ed.similar(sig)))
        logic.append(len(sig) >= LOGIC and sig[0] not in ("import", "from") and sig != ("S",))

    def pct(xs: list[bool], mask: list[bool] | None = None) -> float:
        xs = [x for x, m in zip(xs, mask or [True] * len(xs)) if m]
        return 100.0 * sum(xs) / len(xs) if xs else 0.0

    every = [n for b in blocks for n in b]
    return Row(name, len(verb), pct(verb), pct(sim), sum(logic), pct(verb, logic), pct(sim, logic), 100 * runs,
               pct([n in in_block for n in every]))


def measure_lab(name: str, ed: Edition) -> Row:
    lab = find_lab(name, ROOT)
    text = lab.source.read_text()
    return measure(lab.name, text, solution_blocks(text), ed)


def baseline(ed: Edition) -> Row:
    import argparse as m1
    import difflib as m2
    import json.decoder as m3

    rows = []
    for m in (m1, m2, m3):
        text = Path(m.__file__).read_text()
        rows.append(measure(m.__name__, text, [[n for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]], ed))
    return total(rows, "baseline: stdlib argparse, difflib, json.decoder")


HEAD = ["lab", "lines", "verbatim %", "similar %", "logic lines", "logic verbatim %", "logic similar %", "runs %",
        "similar blocks %"]


def cells(r: Row) -> list[str]:
    return [r.lab, str(r.lines), f"{r.verbatim:.0f}", f"{r.similar:.0f}", str(r.logic),
            f"{r.logic_verbatim:.0f}", f"{r.logic_similar:.0f}", f"{r.runs:.0f}", f"{r.blocks:.0f}"]


def total(rows: list[Row], name: str = "all labs") -> Row:
    def w(attr: str, n: str) -> float:
        den = sum(getattr(r, n) for r in rows)
        return sum(getattr(r, attr) * getattr(r, n) for r in rows) / den if den else 0.0
    return Row(name, sum(r.lines for r in rows), w("verbatim", "lines"), w("similar", "lines"),
               sum(r.logic for r in rows), w("logic_verbatim", "logic"), w("logic_similar", "logic"), w("runs", "lines"),
               w("blocks", "lines"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="a Markdown table for grading/README.md")
    ap.add_argument("--lab", action="append", help="only this lab (repeatable); default: every lab")
    ap.add_argument("--no-baseline", action="store_true", help="leave out the standard-library baseline row")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    ed = Edition(ROOT)
    rows = [measure_lab(name, ed) for name in (args.lab or list_labs(ROOT))]
    table = [cells(r) for r in rows] + ([cells(total(rows))] if len(rows) > 1 else [])
    table += [] if args.no_baseline else [cells(baseline(ed))]
    if args.markdown:
        print("| " + " | ".join(HEAD) + " |\n|" + "---|" * len(HEAD))
        for c in table:
            print("| " + " | ".join([f"`{c[0]}`" if c[0].startswith("lab") else c[0], *c[1:]]) + " |")
    else:
        widths = [max(len(h), *(len(c[i]) for c in table)) for i, h in enumerate(HEAD)]
        for c in [HEAD] + table:
            print("  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(c, widths))))
    print(f"\n{len(ed.lines)} edition lines, {len(ed.sigs)} normalised; measured in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
