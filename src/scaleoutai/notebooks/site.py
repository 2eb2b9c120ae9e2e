"""The course as a static website: ``scaleout site build --out DIR [--smoke|--full] [--path NAME]`` (issue 36).

Toolchain: Sphinx with ``myst-nb`` and ``sphinx-book-theme``. Jupyter Book 2 (the MyST engine) needs
Node.js and fetches its theme at build time; Sphinx is pure Python, installs from the course's pins and
builds and serves with no network. Steps:

1. Every chapter is executed by the course's own runner (``execute.run_one``: papermill in a child
   process with a time limit), at smoke size or lesson size, into a cache keyed by the SHA-256 of the
   chapter folder's files, the library's sources and version, and the size. A rebuild after one chapter
   changes executes that chapter only; a progress bar runs and a table of chapter times is printed.
2. The executed copies get a banner (download, open in JupyterLab) and links from the first mention of
   each glossary term to its entry; the home page, the course paths, the glossary, the notation and each
   lab's statement (as ``scaleout assign`` releases it: stubs, never the answer) are written beside them.
3. The site holds no answer: every line of its sources is checked as the student edition is (no line of
   the solutions manual, no hidden-test line of 60+ characters, no solution marker).
4. Sphinx (in a child process, with a time limit) writes the HTML; MathJax 2 from the
   ``jupyter-server-mathjax`` wheel is copied into ``_static`` so formulas typeset from ``file://`` too.
The output folder is written beside ``DIR`` and renamed, so it is never half-written.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import UserError
from .execute import RunRecord, format_summary, run_one
from .sources import NotebookError, find_repo_root, find_sources, smoke_parameters

SKIP = ("__pycache__", ".ipynb_checkpoints", "_build")
SPHINX_TIMEOUT = 1800.0  # seconds for the HTML of the whole site (a few minutes on 2 cores)


def _digest_tree(folder: Path, h: Any, suffixes: tuple[str, ...] | None = None) -> None:
    for f in sorted(folder.rglob("*")):
        if f.is_file() and not set(SKIP) & set(f.parts) and (suffixes is None or f.suffix in suffixes):
            h.update(str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes() + b"\0")


def library_digest() -> str:
    """The installed library's version and the SHA-256 of its Python sources (an edit counts as a release)."""
    import scaleoutai

    h = hashlib.sha256(scaleoutai.__version__.encode())
    _digest_tree(Path(scaleoutai.__file__).parent, h, (".py", ".yaml", ".json", ".j2"))
    return h.hexdigest()


def cache_key(source: Path, smoke: bool, library: str) -> str:
    """SHA-256 of the chapter folder (its source and helper files), the library digest and the size."""
    h = hashlib.sha256(f"{library}|{'smoke' if smoke else 'full'}|".encode())
    _digest_tree(Path(source).parent, h)
    return h.hexdigest()[:20]


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scaleout-ai" / "site"


def execute_chapters(sources: list[Path], cache: Path, smoke: bool, timeout: float,
                     progress: bool = True) -> list[RunRecord]:
    """Each chapter executed once per cache key: a cached copy of a run that went through is reused (status
    "cached"); a failed run is kept as ``*.failed.ipynb`` and runs again next time."""
    from tqdm import tqdm

    library = library_digest()
    records = []
    bar = tqdm(sources, desc="site: chapters", unit="ch", disable=not progress, file=sys.stderr)
    for source in bar:
        bar.set_postfix_str(source.stem)
        target = cache / f"{source.stem}-{cache_key(source, smoke, library)}.ipynb"
        if target.is_file():
            records.append(RunRecord(source.stem, source, target, "cached", 0.0))
            continue
        params = smoke_parameters(source) if smoke else {}
        record = run_one(source, target, params, timeout)
        if record.status != "ok" and target.is_file():  # only a chapter that ran through is reused
            failed = target.with_name(f"{target.stem}.failed.ipynb")
            os.replace(target, failed)
            record = RunRecord(record.name, record.source, failed, record.status, record.seconds, record.error)
        records.append(record)
    bar.close()
    return records


def _chapter_copy(executed: Path, slug: str, names: list[tuple[str, str]]) -> Any:
    import nbformat

    from .site_pages import chapter_banner, link_terms

    nb = nbformat.read(executed, as_version=4)
    done: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = link_terms(cell.source, names, done)
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), 0)
    nb.cells.insert(first + 1, nbformat.v4.new_markdown_cell(chapter_banner(slug)))
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    return nb


def check_no_answers(site_src: Path, course: Path) -> None:
    """Refuse the site if any page source holds a line of the solutions manual, a hidden-test line of 60+
    characters, or a solution marker (the student edition's rule)."""
    import nbformat

    from .release import answer_lines, answers_in

    hidden, manual = answer_lines(course)
    for f in sorted(site_src.rglob("*")):
        if f.suffix == ".md":
            text = f.read_text(errors="replace")
        elif f.suffix == ".ipynb":
            nb = nbformat.read(f, as_version=4)
            text = "\n".join([c.source for c in nb.cells] + [o.get("text", "") if isinstance(o.get("text"), str) else ""
                                                             for c in nb.cells for o in c.get("outputs", [])])
        else:
            continue
        found = answers_in(text, hidden, manual)
        if found:
            raise UserError(f"refusing to build the site: {f.relative_to(site_src)} contains {', '.join(found[:3])}")


def _lab_pages(course: Path, dest: Path) -> list[tuple[str, str]]:
    """Each lab's statement as ``scaleout assign`` releases it; ``[(docname, title)]``."""
    import nbformat

    from scaleoutai.grading.labs import assign, find_lab, list_labs

    pages = []
    with tempfile.TemporaryDirectory(prefix="scaleout-site-labs-") as tmp:
        for name in list_labs(course):
            released = assign(find_lab(name, course), Path(tmp))
            nb = nbformat.read(released / f"{name}.ipynb", as_version=4)
            title = next((line.lstrip("# ").strip() for c in nb.cells if c.cell_type == "markdown"
                          for line in c.source.splitlines() if line.startswith("# ")), name)
            nbformat.write(nb, dest / f"{name}.ipynb")
            pages.append((f"labs/{name}", title))
    return pages


def write_sources(course: Path, executed: dict[str, Path], src: Path, path_name: str | None) -> None:
    """The Sphinx source tree: conf.py, the home page, chapters, labs, course paths, glossary, notation."""
    import nbformat

    from . import site_pages as pages
    from .glossary import chapter_titles, load_glossary, notation_table
    from .slides import mathjax_root
    from .syllabi import find_path, load_paths
    from .workspace import PARTS

    terms = load_glossary(course / "chapters" / "glossary.yaml")
    titles = chapter_titles(course)
    names = pages.term_names(terms)
    (src / "chapters").mkdir(parents=True)
    (src / "labs").mkdir()
    (src / "paths").mkdir()
    for slug, executed_nb in executed.items():
        nbformat.write(_chapter_copy(executed_nb, slug, names), src / "chapters" / f"{slug}.ipynb")

    def number(slug: str) -> int | str:
        head = slug.split("-")[0]
        return int(head) if head.isdigit() else slug.split("-")[1].upper()

    def label(key: int | str) -> str:
        return f"{'Chapter' if isinstance(key, int) else 'Appendix'} {key}. {titles.get(key, '')}".rstrip(". ")

    doc = {number(s): (f"chapters/{s}", label(number(s))) for s in executed}
    chosen = find_path(path_name, course) if path_name else None
    if chosen:
        parts = [(f"{chosen.title}: the chapters in week order", [doc[c] for c in chosen.chapters() if c in doc])]
    else:
        parts = [(f"Part {num}. {title}", [doc[c] for c in span if c in doc]) for num, title, span in PARTS]
    parts.append(("Appendices", [doc[k] for k in sorted(k for k in doc if isinstance(k, str))]))
    parts = [(caption, docs) for caption, docs in parts if docs]
    paths = []
    for p in ([chosen] if chosen else load_paths(course)):
        weeks = [(w.week, [doc[c] for c in w.chapters if c in doc], f"labs/{w.lab}" if w.lab else None, w.reading)
                 for w in p.weeks]
        (src / "paths" / f"{p.name}.md").write_text(pages.path_page(p.title, p.focus, weeks))
        paths.append((f"paths/{p.name}", p.title, p.focus))
    labs = _lab_pages(course, src / "labs")
    (src / "index.md").write_text(pages.home_page(parts, paths, labs, chosen.title if chosen else None))
    (src / "glossary.md").write_text(pages.glossary_page(terms, titles))
    (src / "notation.md").write_text(pages.notation_page(notation_table(course / "chapters" / "notation.yaml")))
    (src / "conf.py").write_text(pages.CONF)
    shutil.copytree(mathjax_root(), src / "_static" / "mathjax", ignore=lambda folder, names: [
        n for n in names if n in ("a11y", "localization") and Path(folder).name in ("extensions", "static")])


def build_site(out: Path, smoke: bool = True, path_name: str | None = None, patterns: list[str] | None = None,
               cache: Path | None = None, timeout: float = 600, progress: bool = True) -> Path:
    """Execute (or reuse) the chapters, write the site's sources, check them for answers, run Sphinx."""
    course = find_repo_root()
    sources = [s for s in find_sources(course) if s.parent.parent.name == "chapters"]
    if patterns:
        chosen = {p for pattern in patterns for p in find_sources(course, pattern)}
        sources = [s for s in sources if s in chosen]
    if path_name:
        from .glossary import chapter_folders
        from .syllabi import find_path

        wanted = {chapter_folders(course)[c].name for c in find_path(path_name, course).chapters()}
        sources = [s for s in sources if s.parent.name in wanted or s.parent.name.startswith("appendix-")]
    cache = Path(cache) if cache else default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    records = execute_chapters(sources, cache, smoke, timeout, progress)
    if progress:
        print(format_summary(records))
    bad = [r for r in records if r.status not in ("ok", "cached")]
    if bad:
        raise UserError(f"{len(bad)} chapter(s) did not run, so the site was not built: "
                        + "; ".join(f"{r.name}: {r.status} ({r.error})" for r in bad[:3]))
    from .release import replace_folder

    with tempfile.TemporaryDirectory(prefix="scaleout-site-src-") as tmp, \
            replace_folder(out, course, ("chapters", "labs", "grading", "src", "solutions")) as dest:
        src = Path(tmp) / "src"
        write_sources(course, {r.source.stem: r.output for r in records}, src, path_name)
        check_no_answers(src, course)
        start = time.perf_counter()
        warnings = Path(tmp) / "warnings.txt"
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-w", str(warnings), "-d", str(Path(tmp) / "doctrees"),
               str(src), str(dest)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=SPHINX_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise UserError(f"Sphinx did not finish within {exc.timeout:g} s; the site was not written") from None
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no message)"]
            tail = next((ln.strip() for ln in reversed(lines) if "Error" in ln or "error:" in ln), lines[-1])
            raise UserError(f"Sphinx failed (exit {done.returncode}): {tail}")
        count = len(warnings.read_text().splitlines()) if warnings.is_file() else 0
        if progress:
            print(f"Sphinx wrote {len(list(dest.rglob('*.html')))} pages in {time.perf_counter() - start:.1f} s "
                  f"({count} warning line(s))")
    return Path(out).resolve()


def site_command(args: argparse.Namespace) -> int:
    if args.action != "build":
        raise UserError("the only action is 'build': scaleout site build --out DIR")
    try:
        out = build_site(args.out, smoke=not args.full, path_name=args.path, patterns=args.chapters,
                         cache=args.cache, timeout=args.timeout)
    except (NotebookError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"site written to {out}: open {out / 'index.html'} (or `python -m http.server -d {out}`)")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("site", help="build the course website: chapters executed, labs, paths, glossary")
    p.add_argument("action", choices=["build"], help="build: execute (or reuse) chapters and write the HTML")
    p.add_argument("--out", type=Path, required=True, help="folder to write (replaced whole)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="run chapters at their smoke sizes (the default)")
    size.add_argument("--full", action="store_true", help="run chapters at lesson size, for a published site")
    p.add_argument("--path", metavar="NAME", default=None, help="one course path's chapters and navigation")
    p.add_argument("--chapters", metavar="PATTERN", nargs="+", default=None,
                   help="only these chapters (text or glob as in `scaleout notebooks run`)")
    p.add_argument("--cache", type=Path, default=None, help="executed-notebook cache (default ~/.cache/scaleout-ai/site)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per chapter (default 600)")
    p.set_defaults(func=site_command)
