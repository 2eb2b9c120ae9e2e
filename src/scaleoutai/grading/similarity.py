"""``scaleout grade similarity``: which submissions share code with each other or with the student edition.

The method is MOSS's (Schleimer, Wilkerson and Aiken, "Winnowing", SIGMOD 2003):

1. **Normalise.** Python's ``tokenize`` reads each code cell; comments, blank lines and spacing drop
   out; every identifier becomes ``V`` (keywords, builtins and attribute names such as ``.send`` stay:
   a copier cannot rename them freely), every string ``S``, every number ``N``; NEWLINE, INDENT and
   DEDENT stay as ``;``, ``{``, ``}``. Renamed variables, new comments and new spacing leave the stream
   as it was.
2. **Fingerprint.** Every run of K tokens (a k-gram) is hashed; in every window of W consecutive hashes
   the smallest (the rightmost on ties) is kept. Two texts that share a run of K + W - 1 tokens share a
   fingerprint whatever surrounds it, so reordered functions still match; shorter runs are noise.
3. **Only what students wrote counts.** The lab's student release (the notebook with stubs, built by
   ``labs.assign``) is what every submission shares: cells left as released, lines of the release, and
   k-grams of the release are starter code, and only k-grams made wholly of student tokens are kept.
4. **Score.** For a pair, each side's share of its student tokens covered by fingerprints the other
   side has; pairs rank by the larger share. Against the edition (the course library
   ``src/scaleoutai`` and ``chapters/**/*.py``, what a student can paste from), the share covered by
   fingerprints found anywhere in it. A share is a place to look, not a verdict: read the regions.
"""
from __future__ import annotations

import builtins
import csv
import html
import io
import keyword
import tempfile
import tokenize
import zlib
from collections.abc import Container
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import UserError
from .labs import Lab, assign, read_cells
from .results import atomic_write
from .runner import find_submissions

K, W = 20, 6  # k-gram length and winnowing window, in tokens: a shared run of 25 tokens is always seen
FLAG = 0.5  # shares at or above this are marked in the report
_KEEP = frozenset(dir(builtins)) | frozenset(keyword.kwlist)
_STRUCT = {tokenize.NEWLINE: ";", tokenize.INDENT: "{", tokenize.DEDENT: "}"}
_SKIP = {tokenize.NL, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER}


def normalise(source: str) -> list[tuple[str, int]]:
    """(normalised token, 1-based line) for every token of ``source``; a line that cannot be tokenised
    (a broken indent, an unclosed string) is skipped and reading goes on after it."""
    out: list[tuple[str, int]] = []
    lines = io.StringIO(source).readlines()  # on "\n" only, as tokenize counts
    start = 0
    while start < len(lines):
        prev = ""
        try:
            for t in tokenize.generate_tokens(io.StringIO("".join(lines[start:])).readline):
                if t.type in _SKIP or (t.type == tokenize.ERRORTOKEN and not t.string.strip()):
                    continue
                if t.type == tokenize.NAME:
                    tok = t.string if t.string in _KEEP or prev == "." else "V"
                else:
                    tok = _STRUCT.get(t.type) or {tokenize.NUMBER: "N", tokenize.STRING: "S"}.get(t.type, t.string)
                out.append((tok, start + t.start[0]))
                prev = t.string
            break
        except (tokenize.TokenError, SyntaxError) as exc:
            bad = exc.lineno if isinstance(exc, SyntaxError) else exc.args[1][0]
            start += max(int(bad or 1), 1)
    return out


def _squash(line: str) -> str:
    return " ".join(line.split())


@lru_cache(maxsize=None)
def _tid(tok: str) -> int:
    return zlib.crc32(tok.encode())  # stable across runs, unlike hash() of a str


def winnow(hashes: list[int], w: int = W) -> list[int]:
    """Positions of the fingerprints: the rightmost smallest hash of every window of ``w``."""
    picked: list[int] = []
    pos = -1
    for end in range(min(w, len(hashes)) - 1, len(hashes)) if hashes else ():
        lo = max(end - w + 1, 0)
        if pos < lo or hashes[end] <= hashes[pos]:  # the minimum left the window, or a new one came
            pos = end if pos >= lo else min(range(lo, end + 1), key=lambda i: (hashes[i], -i))
            picked.append(pos)
    return picked


@dataclass
class Doc:
    """One text: its lines, each token's line, which tokens a student wrote, its fingerprints."""
    name: str
    text: str
    lines: list[int]
    student: list[bool]
    fp: dict[int, list[int]] = field(default_factory=dict)  # hash -> token positions

    @property
    def size(self) -> int:
        return sum(self.student)


def _doc(name: str, parts: list[str], starter_lines: set[str] = frozenset(), starter_grams: set[int] = frozenset()) -> Doc:
    """A Doc from code parts (cells or one file); starter lines and k-grams are not the student's."""
    text, toks, lines = "", [], []
    for part in parts:
        part = part.rstrip("\n")
        base, last = text.count("\n"), part.count("\n") + 1
        for tok, ln in normalise(part):
            toks.append(_tid(tok))
            lines.append(base + min(ln, last))  # DEDENTs at the end stand on the last line
        text += part + "\n\n"
    src = text.split("\n")
    student = [_squash(src[ln - 1]) not in starter_lines for ln in lines] if starter_lines else [True] * len(lines)
    grams = [hash(tuple(toks[i:i + K])) for i in range(len(toks) - K + 1)]
    for i, g in enumerate(grams):
        if g in starter_grams:
            student[i:i + K] = [False] * K
    doc = Doc(name, text, lines, student)
    for p in winnow(grams):
        if all(student[p:p + K]):
            doc.fp.setdefault(grams[p], []).append(p)
    return doc


def _release(lab: Lab) -> tuple[set[tuple[str, ...]], set[str], set[int]]:
    """The student release's code cells (as token streams), lines and k-grams."""
    with tempfile.TemporaryDirectory() as tmp:
        # every cell, the skipped ones too: a submission that lost its cells' tags still hands them back verbatim
        cells = [c["source"] for c in read_cells(assign(lab, Path(tmp)) / f"{lab.name}.ipynb")]
    streams = [tuple(t for t, _ in normalise(c)) for c in cells]
    grams = {hash(tuple(_tid(t) for t in s[i:i + K])) for s in streams for i in range(len(s) - K + 1)}
    lines = {_squash(ln) for c in cells for ln in c.splitlines()} - {""}
    return set(streams), lines, grams


def edition_files(root: Path) -> list[Path]:
    """What a student can paste from: the course library and the chapters' sources."""
    lib = root / "src" / "scaleoutai"
    if not lib.is_dir():
        import scaleoutai

        lib = Path(scaleoutai.__file__).parent
    return sorted(lib.rglob("*.py")) + sorted((root / "chapters").rglob("*.py"))


@lru_cache(maxsize=2)
def _edition(root: Path) -> tuple[list[Path], dict[int, tuple[int, int]], list[list[int]]]:
    """Fingerprint -> (file, token position) of its first occurrence, and each file's token lines."""
    files, index, lines = edition_files(root), {}, []
    for n, f in enumerate(files):
        d = _doc(str(f), [f.read_text(errors="replace")])
        lines.append(d.lines)
        for h, ps in d.fp.items():
            index.setdefault(h, (n, ps[0]))
    return files, index, lines


def edition_share(parts: list[str], root: Path) -> float:
    """The share of the tokens of ``parts`` (code) covered by fingerprints of the edition under ``root``."""
    return _share(_doc("", parts), _edition(root)[1])


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _regions(matches: list[tuple[int, int]]) -> list[list[int]]:
    """Shared fingerprints (position in a, position in b) merged into runs [a0, a1, b0, b1) of tokens."""
    out: list[list[int]] = []
    for pa, pb in sorted(matches):
        r = out[-1] if out else None
        if r and pa <= r[1] and r[2] <= pb <= r[3]:
            r[1], r[3] = max(r[1], pa + K), max(r[3], pb + K)
        else:
            out.append([pa, pa + K, pb, pb + K])
    return out


def _share(d: Doc, hashes: Container[int]) -> float:
    cover = {i for h, ps in d.fp.items() if h in hashes for p in ps for i in range(p, p + K)}
    return len(cover) / d.size if d.size else 0.0


@dataclass
class Pair:
    a: Doc
    b: Doc
    share_a: float
    share_b: float

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


@dataclass
class Source:
    """A submission against the edition: its share, and the regions of the (up to 3) closest files."""
    doc: Doc
    share: float
    files: list[tuple[int, list[list[int]]]]  # (edition file number, regions)


@dataclass
class Report:
    lab: str
    root: Path
    docs: list[Doc]
    pairs: list[Pair]
    edition: list[Source]
    skipped: list[str]

    def file(self, n: int) -> str:
        """Edition file number ``n``, relative to the course root."""
        return _rel(_edition(self.root)[0][n], self.root)


def compare(lab: Lab, paths: list[Path], root: Path | None = None) -> Report:
    """Every pair of submissions and every submission against the edition."""
    subs = find_submissions(paths)
    if not subs:
        raise UserError(f"no submissions under {', '.join(map(str, paths))}; pass notebooks or folders of them")
    cells, lines, grams = _release(lab)
    docs, skipped = [], []
    for s in subs:
        try:
            if s.notebook is None:
                raise ValueError(s.problem)
            kept = [f"# %% cell {n}\n{c['source']}" for n, c in enumerate(read_cells(s.notebook), 1)
                    if not c["skip"] and tuple(t for t, _ in normalise(c["source"])) not in cells]
            docs.append(_doc(s.id, kept, lines, grams))
        except ValueError as exc:
            skipped.append(f"{s.id}: {exc}")
    pairs = [Pair(a, b, _share(a, b.fp), _share(b, a.fp)) for i, a in enumerate(docs) for b in docs[i + 1:]]
    pairs.sort(key=lambda p: (-p.score, p.a.name, p.b.name))
    root = root or lab.folder.parent.parent
    index = _edition(root)[1]
    edition = []
    for d in docs:
        by_file: dict[int, list[tuple[int, int]]] = {}
        for h, ps in d.fp.items():
            if h in index:
                by_file.setdefault(index[h][0], []).extend((p, index[h][1]) for p in ps)
        top = sorted(by_file, key=lambda n: (-len(by_file[n]), n))[:3]
        edition.append(Source(d, _share(d, index), [(n, _regions(by_file[n])) for n in top]))
    edition.sort(key=lambda e: (-e.share, e.doc.name))
    return Report(lab.name, root, docs, pairs, edition, skipped)


def _side(text: str, tok_lines: list[int], a: int, b: int, ctx: int = 2) -> str:
    """Lines of the token run [a, b) highlighted, with ``ctx`` lines around it, escaped."""
    src = text.split("\n")
    first, last = tok_lines[a], tok_lines[min(b, len(tok_lines)) - 1]
    rows = [f'<span{" class=hit" if first <= ln <= last else ""}><i>{ln:4d}</i> {html.escape(src[ln - 1])}</span>'
            for ln in range(max(first - ctx, 1), min(last + ctx, len(src)) + 1)]
    return "<pre>" + "\n".join(rows) + "</pre>"


def _sbs(left: tuple[str, str, list[int]], right: tuple[str, str, list[int]], regs: list[list[int]]) -> str:
    """A side-by-side table of the matched regions of two texts, each (name, text, token lines)."""
    rows = [f"<tr><td>{_side(*left[1:], r[0], r[1])}</td><td>{_side(*right[1:], r[2], r[3])}</td></tr>" for r in regs]
    return (f"<table class=sbs><tr><th>{html.escape(left[0])}</th><th>{html.escape(right[0])}</th></tr>"
            f"{''.join(rows) or '<tr><td colspan=2>no shared code</td></tr>'}</table>")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


CSS = ("body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
       "padding:3px 8px;vertical-align:top}tr.flag td{background:#fde2e2}pre{margin:0;font:12px monospace}"
       ".hit{background:#fff1a8;display:block}i{color:#999;font-style:normal}table.sbs td{width:50%}")


def render(rep: Report, top: int) -> str:
    """The self-contained HTML report; every student and edition text goes through html.escape."""
    e, files, _, flines = html.escape, *_edition(rep.root)

    def row(cols: list[str], flag: bool) -> str:
        return f"<tr{' class=flag' if flag else ''}>" + "".join(f"<td>{c}</td>" for c in cols) + "</tr>"
    pairs = [(f"p{n}", f"{n}. {p.a.name} ~ {p.b.name}: {_pct(p.score)}", p) for n, p in enumerate(rep.pairs[:top], 1)]
    sources = [(f"e{n}", f"{s.doc.name} ~ edition: {_pct(s.share)}", s) for n, s in enumerate(rep.edition[:top], 1)]
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>Similarity: {e(rep.lab)}</title>"
           f"<style>{CSS}</style></head><body><h1>Similarity of submissions: {e(rep.lab)}</h1>",
           f"<p>{len(rep.docs)} submissions, {len(rep.pairs)} pairs, and the student edition ({len(files)} files). "
           f"Starter code is left out; identifiers and literals are renamed before comparing, so renamed variables "
           f"and reordered functions still match. A share is the part of a submission's own code found in the other; "
           f"rows at {_pct(FLAG)} or more are marked. Read the regions: a prescribed algorithm makes honest answers "
           f"look alike.</p><h2>Pairs (top {top} of {len(rep.pairs)}; all in pairs.csv)</h2><table><tr><th>pair</th>"
           f"<th>a</th><th>b</th><th>score</th><th>share of a</th><th>share of b</th></tr>"]
    out += [row([f"<a href='#{a}'>{n}</a>", e(p.a.name), e(p.b.name), _pct(p.score), _pct(p.share_a),
                 _pct(p.share_b)], p.score >= FLAG) for n, (a, _, p) in enumerate(pairs, 1)]
    out.append("</table><h2>Against the student edition</h2><table><tr><th>submission</th><th>share</th>"
               "<th>closest files</th></tr>")
    out += [row([f"<a href='#{a}'>{e(s.doc.name)}</a>", _pct(s.share), e(", ".join(rep.file(n) for n, _ in s.files))],
                s.share >= FLAG) for a, _, s in sources]
    out.append("</table>")
    if rep.skipped:
        out.append("<h2>Not compared</h2><ul>" + "".join(f"<li>{e(s)}</li>" for s in rep.skipped) + "</ul>")
    out.append("<h2>Matched regions</h2>")
    for a, t, p in pairs:
        regs = _regions([(pa, p.b.fp[h][0]) for h in set(p.a.fp) & set(p.b.fp) for pa in p.a.fp[h]])
        out.append(f"<h3 id={a}>{e(t)}</h3>" + _sbs((p.a.name, p.a.text, p.a.lines), (p.b.name, p.b.text, p.b.lines),
                                                  regs))
    for a, t, s in sources:
        out.append(f"<h3 id={a}>{e(t)}</h3>" + ("".join(_sbs((s.doc.name, s.doc.text, s.doc.lines), (
            rep.file(n), files[n].read_text(errors="replace"), flines[n]), regs) for n, regs in s.files)
            or "<p>nothing in common</p>"))
    return "\n".join(out + ["</body></html>\n"])


def _csv(rows: list[list]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def run(lab: Lab, paths: list[Path], out: Path, top: int = 20) -> str:
    """Compare, write ``out/report.html``, ``pairs.csv`` and ``edition.csv`` atomically; return what to print."""
    def unwritable(exc: OSError) -> UserError:
        return UserError(f"cannot write the report to {out}: {exc.strerror or exc}; give a folder you can write to")

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(exc) from None
    rep = compare(lab, paths)
    closest = {s.doc.name: rep.file(s.files[0][0]) if s.files else "" for s in rep.edition}
    pairs = [[n, p.a.name, p.b.name, f"{p.score:.3f}", f"{p.share_a:.3f}", f"{p.share_b:.3f}", p.a.size, p.b.size]
             for n, p in enumerate(rep.pairs, 1)]
    sources = [[s.doc.name, f"{s.share:.3f}", s.doc.size, closest[s.doc.name]] for s in rep.edition]
    try:
        atomic_write(out / "pairs.csv", _csv([["rank", "a", "b", "score", "share_a", "share_b", "tokens_a",
                                               "tokens_b"]] + pairs))
        atomic_write(out / "edition.csv", _csv([["submission", "share", "tokens", "closest_file"]] + sources))
        atomic_write(out / "report.html", render(rep, top).encode("ascii", "xmlcharrefreplace").decode())
    except OSError as exc:
        raise unwritable(exc) from None
    lines = [f"similarity of {len(rep.docs)} submissions to {rep.lab}: {len(rep.pairs)} pairs, "
             f"{sum(p.score >= FLAG for p in rep.pairs)} at {_pct(FLAG)} or more; "
             f"{sum(s.share >= FLAG for s in rep.edition)} with {_pct(FLAG)} or more from the edition"
             f"{f'; {len(rep.skipped)} not compared' if rep.skipped else ''}; report: {out / 'report.html'}"]
    lines += [f"  {_pct(p.score):>4}  {p.a.name} ~ {p.b.name}  ({_pct(p.share_a)} / {_pct(p.share_b)})"
              for p in rep.pairs[:top]]
    lines += [f"  {_pct(s.share):>4}  {s.doc.name} ~ edition ({closest[s.doc.name]})" for s in rep.edition[:top]
              if s.share >= FLAG]
    return "\n".join(lines)
