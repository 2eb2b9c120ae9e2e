"""Lecture slides from the executed chapter notebooks: ``scaleout slides CHAPTER [--out DIR]``.

A chapter becomes a reveal.js deck through nbconvert's ``SlidesExporter``; the chapter source is never
rewritten: ``mark_slides`` sets ``slideshow`` metadata on an in-memory copy of the executed notebook.

Slide structure (defaults, so an unmarked chapter still gives a good deck):

- Markdown cells are cut at their level-1 and level-2 heading lines (outside code fences). The
  ``# Chapter N. Title`` heading is the title slide and every ``## ...`` heading (sections 1-9, What's
  next) a slide, showing the heading and the first ``MAX_FORMULAS`` display formulas (``$$...$$``) of
  its prose; the prose under a heading, and any other markdown, becomes the speaker notes (``notes``)
  of the slide before it (press ``s`` in the deck).
- Code cells that show the library's code (they call ``show(``), cells tagged ``slide`` or
  ``slide-code``, and every cell with an image output (a figure) are sub-slides. Their code is hidden
  (only the outputs show) unless the cell is tagged ``slide-code``; stderr (warnings) is left off.
- Every other cell is skipped, so are notes before the first slide.

Chapters override the defaults with jupytext cell metadata in the percent source, never a second copy
of the content: ``# %% tags=["slide"]`` puts a code cell on a sub-slide; on a markdown cell it shows
the cell's text on the slides instead of in the notes; ``# %% tags=["slide-code"]`` also shows the
code; an explicit ``slideshow={"slide_type": "skip"}`` (or any other ``slide_type``) is used as given.

reveal.js works offline: its files (reveal.js 5, theme ``white``, the speaker-notes plugin) ship in
the ``sphinx-revealjs`` wheel; ``render_deck`` copies them beside the deck (``DIR/reveal.js/``) and the
deck loads them by that relative path, so it opens from ``file://`` with no network. nbconvert's own
reveal template also loads require.js, jQuery, mermaid and MathJax from CDNs; our template (a child of
it) leaves those out and loads reveal.js with plain script tags. Formulas on the slides are typeset by
reveal.js's math plugin with MathJax 2 from the ``jupyter-server-mathjax`` wheel, copied beside reveal.js
(``DIR/reveal.js/mathjax/``, without its accessibility extensions and translations), so they work offline too.
Output: ``DIR/NN-slug.slides.html`` and ``DIR/reveal.js/``, written to a temp folder, then renamed.
"""
from __future__ import annotations

import argparse
import copy
import filecmp
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import NotebookError, UserError

SLIDE_TAG, CODE_TAG = "slide", "slide-code"
ASSETS = "reveal.js"  # the folder beside the deck; also the deck's reveal_url_prefix
# what the deck needs from the reveal.js distribution (relative to its root)
ASSET_FILES = ("LICENSE", "dist/reveal.js", "dist/reveal.css", "dist/theme/white.css",
               "dist/theme/fonts/source-sans-pro", "plugin/notes", "plugin/math/math.js")
_KEYS = ("dist/reveal.js", "dist/reveal.css", "dist/theme/white.css", "plugin/notes/notes.js",
         "mathjax/MathJax.js")  # the same copy?
MATH_PLUGIN = "plugin/math/math.js"
MATHJAX = "mathjax"  # inside ASSETS
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full"
_MATHJAX_SKIP = ("a11y", "localization")  # 4 of MathJax's 10 MB: screen-reader extras and translations
_HEADING = re.compile(r"^(#{1,2})\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SHOW = re.compile(r"(?<![.\w])show\(")  # show(fn) of the library, not plt.show()
_DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
MAX_FORMULAS = 3  # display formulas of a section's prose shown on its slide

# A child of nbconvert's reveal template, beside this module: the cells render as there; what loads from a
# CDN is dropped; reveal.js, its notes and math plugins and MathJax load from the copy beside the deck.
TEMPLATE_NAME = "scaleout-slides.html.j2"


def _tags(cell: Any) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _has_image(cell: Any) -> bool:
    return any(key.startswith("image/") for out in cell.get("outputs", []) for key in out.get("data", {}))


def _split_at_headings(text: str) -> list[tuple[str, str]]:
    """(heading line or "", body) chunks of a markdown text, cut at its ``#``/``##`` lines outside fences."""
    chunks: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and _HEADING.match(line):
            chunks.append((line.strip(), []))
        else:
            chunks[-1][1].append(line)
    return [(head, "\n".join(body).strip()) for head, body in chunks if head or "\n".join(body).strip()]


def _unfenced(text: str) -> str:
    """``text`` without its fenced code blocks."""
    keep, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            keep.append(line)
    return "\n".join(keep)


def _markdown(source: str, slide_type: str, cell_id: str) -> Any:
    from nbformat.v4 import new_markdown_cell

    cell = new_markdown_cell(source, metadata={"slideshow": {"slide_type": slide_type}})
    cell["id"] = cell_id  # deterministic ids: the same notebook gives the same deck
    return cell


def _mark_markdown(cell: Any, index: int) -> list[Any]:
    """A markdown cell as slide (heading), notes (prose) or, tagged ``slide``, shown text."""
    shown = SLIDE_TAG in _tags(cell)
    out = []
    for k, (head, body) in enumerate(_split_at_headings(cell.source)):
        cid = f"{cell.get('id', index)}-{k}"
        if not head:
            out.append(_markdown(body, "subslide" if shown else "notes", cid))
        elif shown:
            out.append(_markdown(f"{head}\n\n{body}".strip(), "slide", cid))
        else:  # the heading, with the section's first display formulas: the prose stays in the notes
            formulas = [f"$${m.strip()}$$" for m in _DISPLAY_MATH.findall(_unfenced(body))][:MAX_FORMULAS]
            out.append(_markdown("\n\n".join([head, *formulas]), "slide", cid))
            if body:
                out.append(_markdown(body, "notes", cid + "-notes"))
    return out


def mark_slides(nb: Any) -> Any:
    """A copy of ``nb`` with ``slideshow`` metadata set by the rules of the module docstring."""
    from nbformat import from_dict

    nb = copy.deepcopy(nb)
    cells = []
    for index, cell in enumerate(nb.cells):
        given = cell.get("metadata", {}).get("slideshow", {}).get("slide_type")
        if cell.cell_type == "markdown" and given is None:
            cells.extend(_mark_markdown(cell, index))
            continue
        if cell.cell_type == "code":
            tags = _tags(cell)
            key = bool(tags & {SLIDE_TAG, CODE_TAG}) or bool(_SHOW.search(cell.source)) or _has_image(cell)
            cell.metadata.setdefault("slideshow", {})["slide_type"] = given or ("subslide" if key else "skip")
            if CODE_TAG not in tags:
                cell.metadata["transient"] = {"remove_source": True}
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("name") != "stderr"]
        elif given is None:  # raw cells
            cell.metadata["slideshow"] = {"slide_type": "skip"}
        cells.append(cell)
    seen_slide = False
    for cell in cells:  # notes need a slide to belong to
        kind = cell.metadata["slideshow"]["slide_type"]
        if kind == "notes" and not seen_slide:
            cell.metadata["slideshow"]["slide_type"] = "skip"
        seen_slide = seen_slide or kind not in ("notes", "skip")
    nb.cells = cells
    return from_dict(nb)  # attribute access all the way down, as nbconvert's templates expect


def count_slides(nb: Any) -> int:
    """The number of horizontal slides a marked notebook gives (reveal.js's getHorizontalSlides)."""
    kinds = [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells]
    visible = [k for k in kinds if k not in ("notes", "skip")]
    # nbconvert makes the first visible cell a slide whatever its type
    return (1 if visible else 0) + sum(k == "slide" for k in visible[1:])


def reveal_root() -> Path:
    """The reveal.js distribution shipped in the sphinx-revealjs wheel (found without importing Sphinx)."""
    from importlib.util import find_spec

    spec = find_spec("sphinx_revealjs")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("reveal.js is missing: install the course's 'sphinx-revealjs' package "
                        "(pip install -c environments/constraints.txt sphinx-revealjs)")
    root = Path(list(spec.submodule_search_locations)[0]) / "_static" / "revealjs"
    missing = [f for f in ASSET_FILES if not (root / f).exists()]
    if missing:
        raise UserError(f"the reveal.js copy in {root} lacks {', '.join(missing)}; reinstall sphinx-revealjs")
    return root


def mathjax_root() -> Path:
    """MathJax 2 as the ``jupyter-server-mathjax`` wheel ships it (its ``static/`` folder)."""
    from importlib.util import find_spec

    spec = find_spec("jupyter_server_mathjax")
    root = Path(list(spec.submodule_search_locations)[0]) / "static" if spec and spec.submodule_search_locations else None
    if root is None or not (root / "MathJax.js").is_file() or not (root / "config" / f"{MATHJAX_CONFIG}.js").is_file():
        raise UserError("MathJax is missing: install the course's 'jupyter-server-mathjax' package "
                        "(pip install -c environments/constraints.txt jupyter-server-mathjax)")
    return root


def _copy_assets(dest: Path) -> None:
    root = reveal_root()
    for name in ASSET_FILES:
        src, target = root / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target)
        else:
            shutil.copy2(src, target)
    shutil.copytree(mathjax_root(), dest / MATHJAX, ignore=lambda folder, names: [
        n for n in names if n in _MATHJAX_SKIP and Path(folder).name in ("extensions", "static")])


def export_html(nb: Any, name: str) -> str:
    """The reveal.js HTML of a marked notebook, loading reveal.js from ``./reveal.js/``."""
    import jinja2
    from nbconvert import SlidesExporter

    exporter = SlidesExporter(extra_loaders=[jinja2.FileSystemLoader(str(Path(__file__).parent))],
                              template_file=TEMPLATE_NAME, reveal_url_prefix=ASSETS, reveal_theme="white",
                              exclude_input_prompt=True, exclude_output_prompt=True)
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": name}})
    return html


def _install(tmp: Path, out_dir: Path, deck_name: str) -> None:
    """Move the assets, then the deck, from ``tmp`` into ``out_dir``: the deck appears only when complete."""
    assets = out_dir / ASSETS
    same = all((assets / f).is_file() and filecmp.cmp(tmp / ASSETS / f, assets / f, shallow=False) for f in _KEYS)
    if not same:  # another reveal.js version (or none): swap the folder whole
        old = out_dir / f".{ASSETS}.old.{os.getpid()}"
        if assets.exists():
            os.replace(assets, old)
        os.replace(tmp / ASSETS, assets)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp / deck_name, out_dir / deck_name)


def render_deck(executed_ipynb: Path, out_dir: Path, name: str | None = None) -> Path:
    """Render an executed notebook as ``out_dir/NAME.slides.html`` (NAME: the notebook's stem) with reveal.js
    beside it; no browser. Raises NotebookError for an unreadable notebook or a deck with no slides."""
    import nbformat

    executed_ipynb, out_dir = Path(executed_ipynb), Path(out_dir)
    name = name or executed_ipynb.stem
    try:
        nb = nbformat.read(str(executed_ipynb), as_version=4)
    except (OSError, ValueError) as exc:  # nbformat's NotJSONError and validation errors are ValueErrors
        raise NotebookError(f"cannot read the notebook {executed_ipynb}: {exc}") from None
    marked = mark_slides(nb)
    if count_slides(marked) == 0:
        raise NotebookError(f"{executed_ipynb}: the deck has no slides: give the notebook a '# Title' or "
                            f"'## N. Section' markdown cell, or tag a cell 'slide'")
    html = export_html(marked, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    deck_name = f"{name}.slides.html"
    with tempfile.TemporaryDirectory(prefix=".slides-", dir=out_dir) as tmp:
        (Path(tmp) / deck_name).write_text(html, encoding="utf-8")
        _copy_assets(Path(tmp) / ASSETS)
        _install(Path(tmp), out_dir, deck_name)
    return out_dir / deck_name


def slides_command(args: argparse.Namespace) -> int:
    """``scaleout slides CHAPTER``: execute the chapter (or take ``--executed``), render, print the deck's path."""
    from .execute import run
    from .sources import find_repo_root, find_sources

    root = find_repo_root()
    sources = find_sources(root, args.chapter)  # an unknown name is a NotebookError listing the chapters
    if len(sources) != 1:
        raise UserError(f"{args.chapter!r} matches {len(sources)} chapters "
                        f"({', '.join(s.stem for s in sources)}); name one")
    source = sources[0]
    out_dir = Path(args.out) if args.out is not None else root / "_build" / "slides"
    if args.executed is not None:
        if not Path(args.executed).is_file():
            raise UserError(f"--executed {args.executed}: no such notebook")
        print(render_deck(Path(args.executed), out_dir, name=source.stem))
        return 0
    if args.timeout <= 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    size = "full" if args.full else "smoke"
    print(f"executing {source.stem} at {size} size (--executed PATH.ipynb reuses a run) ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="scaleout-slides-") as tmp:
        [record] = run([source], smoke=not args.full, timeout=args.timeout, out_dir=Path(tmp), progress=False)
        if record.status != "ok":
            raise UserError(f"{source.stem} did not run ({record.status}): {record.error}; no deck written")
        print(render_deck(record.output, out_dir, name=source.stem))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``scaleout slides`` (called from ``commands.register``)."""
    slides = subparsers.add_parser("slides", help="a chapter as a reveal.js deck (offline) from its executed notebook")
    slides.add_argument("chapter", help="chapter folder or notebook name: text or glob ('04', '*comm*')")
    slides.add_argument("--out", type=Path, default=None, help="output folder (default _build/slides)")
    slides.add_argument("--executed", type=Path, default=None, metavar="PATH.ipynb",
                        help="an already executed copy of the chapter (skips the run)")
    slides.add_argument("--full", action="store_true", help="execute at the full lesson size, not the smoke size")
    slides.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for the run (default 600)")
    slides.set_defaults(func=slides_command)
