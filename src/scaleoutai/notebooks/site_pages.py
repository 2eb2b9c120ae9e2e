"""The pages of the course website that are not chapters (issue 36): the home page with the part menu,
the five course paths, the glossary and notation, each lab's statement, and the Sphinx configuration.

Also ``link_terms``: the first mention of each glossary term in a chapter's prose becomes a link to its
entry (MyST's ``{term}`` role), never inside code, math, links, HTML or headings.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from .glossary import Term, normalize, render_notation

# code fences, inline code, display and inline math, links and images, HTML tags, headings, MyST roles
_PROTECT = re.compile(r"```.*?```|~~~.*?~~~|\{[\w:-]+\}`[^`]*`|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]+\$"
                      r"|!?\[[^\]\n]*\]\([^)\n]*\)|<[^>\n]+>|^\s*#+ .*$", re.S | re.M)

CONF = '''# Written by `scaleout site build`; not a course file.
project = "Scaling Out AI"
author = "the scaleout-ai course"
html_title = "Scaling Out AI"
extensions = ["myst_nb", "sphinx.ext.mathjax"]
nb_execution_mode = "off"          # chapters arrive executed (and cached) by scaleout's own runner
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True, "show_navbar_depth": 1, "use_download_button": True,
    "use_repository_button": False, "use_fullscreen_button": False, "launch_buttons": {},
    "show_toc_level": 2,
}
html_static_path = ["_static"]
html_last_updated_fmt = None
# MathJax 2 from the jupyter-server-mathjax wheel, copied into _static: formulas typeset offline
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax2_config = {"tex2jax": {"inlineMath": [["\\\\(", "\\\\)"]], "displayMath": [["\\\\[", "\\\\]"]],
                                "processRefs": False, "processEnvironments": False,
                                # myst-nb marks each page tex2jax_ignore: typeset only its math spans
                                "processClass": "math"},
                    # the wheel ships the STIX web fonts only (JupyterLab's choice): no TeX font lookups
                    "HTML-CSS": {"availableFonts": [], "preferredFont": None, "webFont": "STIX-Web", "imageFont": None}}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["myst.header", "myst.xref_missing", "mystnb.unknown_mime_type", "toc.not_included"]
'''


def link_terms(text: str, names: list[tuple[str, str]], done: set[str]) -> str:
    """Link the first unprotected mention of each name (a term or an alias) whose term is not in ``done``.

    ``names`` is ``(surface, term)`` longest surface first, so "ring all-reduce" wins over "all-reduce";
    a trailing plural s is part of the mention. ``done`` collects the terms linked (one link per chapter).
    """
    for surface, term in names:
        if term in done:
            continue
        pattern = re.compile(rf"(?<![\w-]){re.escape(surface)}(?:e?s)?(?![\w-])", re.I)
        protected = [m.span() for m in _PROTECT.finditer(text)]
        for m in pattern.finditer(text):
            if any(a <= m.start() < b for a, b in protected):
                continue
            text = f"{text[:m.start()]}{{term}}`{m.group(0)} <{term}>`{text[m.end():]}"
            done.add(term)
            break
    return text


def term_names(terms: Iterable[Term]) -> list[tuple[str, str]]:
    """(surface, term) for every term and alias, longest first; names under 4 letters are left unlinked."""
    pairs = [(name, t.term) for t in terms for name in (t.term, *t.aliases) if len(normalize(name)) >= 4]
    return sorted(pairs, key=lambda p: (-len(p[0]), p[0].lower()))


def glossary_page(terms: list[Term], titles: dict[Any, str]) -> str:
    """Sphinx's glossary directive: each term with its aliases as extra names, its chapter and definition."""
    lines = ["# Glossary", "", "Every term of the course, with the chapter that develops it. A term in a chapter's prose",
             "links here the first time it appears.", "", "```{glossary}", ":sorted:", ""]
    for t in terms:
        owner = f"Chapter {t.owner}" if isinstance(t.owner, int) else f"Appendix {t.owner}"
        title = titles.get(t.owner)
        see = f" See also: {', '.join(t.see)}." if t.see else ""
        symbol = f" Symbol: ${t.symbol}$." if t.symbol else ""
        lines += [t.term, *t.aliases, f"  {t.definition} ({owner}{': ' + title if title else ''}.){symbol}{see}", ""]
    return "\n".join(lines + ["```", ""])


def notation_page(table: dict[str, dict]) -> str:
    return "\n".join(["# Notation", "", "The symbols every chapter uses, where each is first used, and what it",
                      "must never count.", "", render_notation(table), ""])


def _toctree(caption: str | None, entries: list[str], hidden: bool = False) -> list[str]:
    head = ["```{toctree}", ":maxdepth: 1"] + ([f":caption: {caption}"] if caption else []) + ([":hidden:"] if hidden else [])
    return head + ["", *entries, "```", ""]


def home_page(parts: list[tuple[str, list[tuple[str, str]]]], paths: list[tuple[str, str, str]],
              labs: list[tuple[str, str]], path_title: str | None = None) -> str:
    """The landing page: one toctree per part (the sidebar's part menu), the course paths, labs, reference.

    ``parts`` is ``[(caption, [(docname, title)])]``; ``paths`` is ``[(docname, title, focus)]``."""
    intro = (f"This site follows the course path **{path_title}**: its chapters in the order of its weeks."
             if path_title else "Forty-one chapters in eight parts and four appendices, executed with their outputs.")
    lines = ["# Scaling Out AI", "", intro, "Each chapter page links its notebook to download or to open in "
             "JupyterLab (`make lab`), and every figure and number on it came from running that notebook.", ""]
    for caption, docs in parts:
        lines += [f"## {caption}", "", *[f"- [{title}]({doc}.ipynb)" for doc, title in docs], ""]
    if paths:
        lines += ["## Course paths", "", *[f"- [{title}]({doc}.md): {focus}" for doc, title, focus in paths], ""]
    if labs:
        lines += ["## Graded labs", "", "The statements only: you write the answers, the grader runs hidden tests.", "",
                  *[f"- [{title}]({doc}.ipynb)" for doc, title in labs], ""]
    lines += ["## Reference", "", "- [Glossary](glossary.md)", "- [Notation](notation.md)", ""]
    for caption, docs in parts:
        lines += _toctree(caption, [doc for doc, _ in docs], hidden=True)
    if paths:
        lines += _toctree("Course paths", [doc for doc, _, _ in paths], hidden=True)
    if labs:
        lines += _toctree("Graded labs", [doc for doc, _ in labs], hidden=True)
    return "\n".join(lines + _toctree("Reference", ["glossary", "notation"], hidden=True))


def path_page(title: str, focus: str, weeks: list[tuple[int, list[tuple[str, str]], str | None, str]]) -> str:
    """One course path week by week: ``weeks`` is ``[(week, [(docname, title)], lab docname, reading)]``,
    docnames relative to the site root."""
    lines = [f"# {title}", "", focus, "", "| week | chapters | lab | reading |", "|---|---|---|---|"]
    for week, chapters, lab, reading in weeks:
        links = ", ".join(f"[{t}](../{d}.ipynb)" for d, t in chapters) or "capstone"
        lab_link = f"[{Path(lab).name[:5]}](../{lab}.ipynb)" if lab else ""
        lines.append(f"| {week} | {links} | {lab_link} | {reading} |")
    return "\n".join(lines + [""])


def chapter_banner(slug: str) -> str:
    """The links at the top of a chapter page: the executed notebook, and the same chapter in JupyterLab."""
    return (f"{{download}}`Download this notebook <{slug}.ipynb>` · "
            f"[Open in JupyterLab](http://localhost:8888/lab/tree/chapters/{slug}/{slug}.ipynb) "
            "(start it with `make lab` in the course folder)")
