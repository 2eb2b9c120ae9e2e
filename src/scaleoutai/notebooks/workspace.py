"""The student's workspace: generated working copies that ``scaleout lab`` serves, never the course files.

``build_workspace`` writes ``workspace/`` (ignored by git): every chapter as an ``.ipynb`` built from its
py:percent source, every lab as ``scaleout assign`` releases it (stubs and public tests, never the
solution), and ``index.ipynb``, the course index the server lands on. Opening, running and saving in
JupyterLab changes only these copies. A rebuild after a course update replaces a copy the student never
edited; an edited one is kept and the new version is written beside it as ``NAME.updated.ipynb``.
``workspace/.generated.json`` remembers what was generated, so an edit is told from an update.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = ".generated.json"
PARTS = [("I", "Foundations", range(1, 6)), ("II", "Distributed data processing", range(6, 10)),
         ("III", "Distributed machine learning", range(10, 15)), ("IV", "Parallel deep learning", range(15, 22)),
         ("V", "Inference and serving", range(22, 27)), ("VI", "Multi-agent systems", range(27, 33)),
         ("VII", "Infrastructure", range(33, 36)), ("VIII", "Case studies and capstone", range(36, 42))]
PATHS = [("Big Data Algorithms for AI", "Parts I and II"), ("Distributed Machine Learning", "Parts I, III and IV"),
         ("Parallel Deep Learning Systems", "Part I, chapters 15-26"),
         ("Distributed AI and Multi-Agent Systems", "Parts I and VI"),
         ("Distributed AI Infrastructure", "Parts I, IV and VII")]


@dataclass
class WorkspaceReport:
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # edited by the student; the new version is beside it
    unchanged: list[str] = field(default_factory=list)


def _digest(data: bytes) -> str:
    """What counts as the content: for a notebook its cells' types and sources only (JupyterLab rewrites
    kernel metadata and outputs when a chapter is merely opened and run); for other files the bytes."""
    try:
        nb = json.loads(data)
        cells = [(c.get("cell_type"), "".join(c["source"]) if isinstance(c.get("source"), list) else c.get("source"))
                 for c in nb["cells"]]
        data = json.dumps(cells).encode()
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return hashlib.sha256(data).hexdigest()


def _notebook_bytes(source: Path) -> bytes:
    from .execute import KERNELSPEC, read_notebook

    nb = read_notebook(source)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return _stable(nb)


def _stable(nb) -> bytes:
    """The notebook's bytes with cell ids fixed by position, so the same source gives the same bytes, and
    no jupytext pairing: a working copy stands alone (saving it must never write a .py anywhere)."""
    import nbformat

    nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nbformat.writes(nb).encode()


def _course_paths(root: Path) -> list[tuple[str, list[int], list[int]]] | None:
    """(title, chapters in order, planned chapters) of each syllabi/*.yaml path; None without syllabi/."""
    from .syllabi import load_paths

    paths = load_paths(root)
    return [(p.title, p.chapters(), sorted({c for w in p.weeks for c in w.planned})) for p in paths] or None


def _titles(root: Path, labs: list[str]) -> dict[str, str]:
    """{chapter folder or lab name: what a reader sees}: "Chapter 6. MapReduce", the lab's heading."""
    import re

    from .glossary import chapter_folders, chapter_titles

    titles = chapter_titles(root)
    names = {f.name: f"{'Chapter' if isinstance(k, int) else 'Appendix'} {k}. {titles[k]}"
             for k, f in chapter_folders(root).items() if titles.get(k, f.name) != f.name}
    for lab in labs:
        source = Path(root) / "labs" / lab / f"{lab}.py"
        lines = source.read_text(encoding="utf-8").splitlines() if source.is_file() else []
        heading = next((m[1].strip() for m in map(re.compile(r"^# # (.+)$").match, lines) if m), None)
        if heading:
            names[lab] = heading
    return names


def _index(chapters: list[str], labs: list[str], paths: list[tuple[str, list[int], list[int]]] | None = None,
           titles: dict[str, str] | None = None) -> bytes:
    """The course index: parts, the chapters and labs that exist (by title where ``titles`` has one), and
    the five course paths (each linking its chapters, in the order its syllabus meets them, when ``paths``
    comes from syllabi/)."""
    import nbformat

    titles = titles or {}

    lines = ["# Scaling Out AI: the course", "", "Open a chapter, run it top to bottom, then try its exercises. "
             "Your edits stay in this workspace; the course files are never changed.", ""]
    for num, title, span in PARTS:
        mine = [c for c in chapters if c[:2].isdigit() and int(c[:2]) in span]
        lines.append(f"## Part {num}: {title}")
        lines += [f"- [{titles.get(c, c)}](chapters/{c}/{c}.ipynb)" for c in mine] or ["- (coming)"]
        lines.append("")
    extra = [c for c in chapters if not c[:2].isdigit()]
    if extra:
        lines += ["## Appendices", *[f"- [{titles.get(c, c)}](chapters/{c}/{c}.ipynb)" for c in extra], ""]
    lines += ["## Labs (graded)", *[f"- [{titles.get(lab, lab)}](labs/{lab}/{lab}.ipynb)" for lab in labs], ""]
    if paths is None:
        lines += ["## Course paths", *[f"- **{name}**: {what}, then the Chapter 41 capstone" for name, what in PATHS]]
    else:
        folder = {int(c[:2]): c for c in chapters if c[:2].isdigit()}
        # by number, with the chapter's title as the link's tooltip (a path row lists up to 30 chapters)
        link = lambda n: (f'[{n}](chapters/{folder[n]}/{folder[n]}.ipynb "{titles.get(folder[n], folder[n])}")'  # noqa: E731
                          if n in folder else str(n))
        lines += ["## Course paths", "", "Each path starts in Part I and ends with the Chapter 41 capstone; "
                  "`scaleout notebooks list --path NAME` prints one week by week.", ""]
        for title, order, planned in paths:
            later = f" (later: Chapter{'s' if len(planned) > 1 else ''} {', '.join(map(str, planned))}, planned)" if planned else ""
            lines.append(f"- **{title}**: " + " · ".join(link(n) for n in order) + later)
    from .execute import KERNELSPEC, language_info

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("\n".join(lines))])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)  # opens without asking for a kernel
    nb.metadata["language_info"] = language_info()  # in full: the kernel's start does not mark it modified
    return _stable(nb)


def _place(ws: Path, rel: str, data: bytes, old: dict[str, str], new: dict[str, str], report: WorkspaceReport) -> None:
    """Write one generated file unless the student edited the copy there (then write it beside)."""
    target = ws / rel
    new[rel] = _digest(data)
    if target.is_file():
        current = _digest(target.read_bytes())
        if current == new[rel]:
            report.unchanged.append(rel)
            return
        if rel in old and current != old[rel]:  # edited by the student: keep it
            new[rel] = old[rel]
            if old[rel] != _digest(data):
                beside = target.with_name(f"{target.stem}.updated{target.suffix}")
                beside.write_bytes(data)
                report.kept.append(rel)
            return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    report.written.append(rel)


def build_workspace(root: Path, ws: Path) -> WorkspaceReport:
    """(Re)build the working copies of ``root``'s chapters and labs in ``ws``; see the module docstring."""
    import nbformat

    from scaleoutai.grading.labs import assign, find_lab, list_labs

    from .sources import find_sources

    root, ws = Path(root).resolve(), Path(ws).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    manifest = ws / MANIFEST
    old = json.loads(manifest.read_text()) if manifest.is_file() else {}
    new: dict[str, str] = {}
    report = WorkspaceReport()
    chapters = []
    for source in find_sources(root):
        if source.parent.parent.name != "chapters":
            continue
        chapters.append(source.parent.name)
        _place(ws, f"chapters/{source.parent.name}/{source.stem}.ipynb", _notebook_bytes(source), old, new, report)
        for helper in source.parent.iterdir():  # modules and data a chapter imports from its folder
            if helper.is_file() and helper != source and not helper.name.startswith(".") and helper.suffix != ".pyc":
                _place(ws, f"chapters/{source.parent.name}/{helper.name}", helper.read_bytes(), old, new, report)
    labs = list_labs(root)
    with tempfile.TemporaryDirectory() as tmp:
        for name in labs:
            lab = find_lab(name, root)  # the student edition holds released labs, not their solutions
            released = assign(lab, Path(tmp)) if lab.source.is_file() else lab.folder
            for f in sorted(p for p in released.iterdir() if p.is_file()):
                data = _stable(nbformat.reads(f.read_text(), as_version=4)) if f.suffix == ".ipynb" else f.read_bytes()
                _place(ws, f"labs/{name}/{f.name}", data, old, new, report)
    paths = _course_paths(root) if (root / "syllabi").is_dir() else None
    _place(ws, "index.ipynb", _index(chapters, labs, paths, _titles(root, labs)), old, new, report)
    tmp_manifest = ws / f".{MANIFEST}.tmp"
    tmp_manifest.write_text(json.dumps(new, indent=1, sort_keys=True))
    os.replace(tmp_manifest, manifest)
    return report


def default_workspace(root: Path) -> Path:
    return Path(os.environ.get("SCALEOUT_WORKSPACE") or Path(root) / "workspace")

