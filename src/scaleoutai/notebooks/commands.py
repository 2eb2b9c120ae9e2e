"""``scaleout notebooks build|run|list|check`` and ``scaleout lab``."""
from __future__ import annotations

import argparse
from pathlib import Path

from .sources import NotebookError, find_repo_root, find_sources, has_parameters_cell, notebook_name
from ..errors import UserError


def _user_error(exc: Exception) -> Exception:
    return UserError(str(exc))


def _sources(pattern: str | None) -> list[Path]:
    try:
        return find_sources(find_repo_root(), pattern)
    except NotebookError as exc:
        raise _user_error(exc) from None


def cmd_build(args: argparse.Namespace) -> int:
    from .execute import build

    sources = _sources(args.pattern)
    try:
        written = build(sources, args.out)
    except (NotebookError, OSError) as exc:
        raise _user_error(exc) from None
    for path in written:
        print(path)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .execute import run
    from .sources import smoke_parameters

    if args.timeout <= 0:
        raise _user_error(ValueError(f"--timeout must be a positive number of seconds, got {args.timeout:g}"))
    sources = _sources(args.pattern)
    if not sources:
        print(f"no notebook sources under {find_repo_root()}/chapters or capstone")
        return 0
    if args.smoke:
        try:  # every source's smoke comments are checked before anything runs
            for source in sources:
                smoke_parameters(source)
        except NotebookError as exc:
            raise _user_error(exc) from None
    records = run(sources, smoke=args.smoke, timeout=args.timeout, out_dir=args.out, progress=True)
    return 0 if all(r.status == "ok" for r in records) else 1


def cmd_list(args: argparse.Namespace) -> int:
    root = find_repo_root()
    if args.path is not None:  # one course path, week by week (syllabi/NAME.yaml)
        from .syllabi import check_path, find_path, format_path

        try:
            path = find_path(args.path, root)
        except ValueError as exc:
            raise _user_error(exc) from None
        problems = check_path(path, root)
        if problems:
            raise UserError("; ".join(problems))
        print(format_path(path, root))
        return 0
    rows = [("notebook", "folder", "parameters")]
    rows += [(notebook_name(p), str(p.parent.relative_to(root)), "yes" if has_parameters_cell(p) else "MISSING")
             for p in _sources(None)]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for row in rows:
        print(f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """The chapter conventions and the notation lint over chapters/ (what CI checks), one line per finding."""
    from .conventions import check_chapter
    from .notation import lint_source, load_notation

    root = find_repo_root()
    table = root / "chapters" / "notation.yaml"
    if not table.is_file():
        raise UserError(f"no notation table at {table}: run this inside the course checkout")
    try:
        symbols = load_notation(table)
    except ValueError as exc:
        raise _user_error(exc) from None
    chapters = [p for p in _sources(args.pattern) if (root / "chapters") in p.parents]
    findings = [f for p in chapters for f in (*check_chapter(p), *lint_source(p, symbols))]
    for line in findings:
        print(line)
    print(f"{len(chapters)} chapter(s) checked: " + (f"{len(findings)} finding(s)" if findings else "all follow the conventions"))
    return 1 if findings else 0


def cmd_lab(args: argparse.Namespace) -> int:
    from .lab import lab

    return lab(port=args.port, open_browser=not args.no_browser)


def cmd_release(args: argparse.Namespace) -> int:
    from .release import release_course

    if args.what == "solutions":
        from .solutions import release_solutions

        out = release_solutions(find_repo_root(), args.out, args.chapter, html=args.html)
        print(f"solutions manual written to {out}: one notebook per chapter{' with its HTML' if args.html else ''}, "
              f"README.md the index; for instructors only")
        return 0
    if args.chapter or args.html:
        raise UserError("--chapter and --html go with `scaleout release solutions`")
    out = release_course(find_repo_root(), args.out)
    print(f"student edition written to {out}: chapters, labs (stubs and public tests), the library; "
          f"no solutions and no hidden tests")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``notebooks`` (build, run, list), ``release``, ``lab`` and ``slides`` to the ``scaleout`` command."""
    nb = subparsers.add_parser("notebooks", help="build and execute the chapter notebooks")
    sub = nb.add_subparsers(dest="notebooks_command", metavar="ACTION")
    sub.required = True

    build = sub.add_parser("build", help="write .ipynb copies of the sources (default _build/notebooks)")
    build.add_argument("pattern", nargs="?", help="chapter folder or notebook name: text or glob ('04', '*comm*')")
    build.add_argument("--out", type=Path, default=None, help="output folder")
    build.set_defaults(func=cmd_build)

    run = sub.add_parser("run", help="execute the notebooks with papermill (default into _build/executed)")
    run.add_argument("pattern", nargs="?", help="chapter folder or notebook name: text or glob ('04', '*comm*')")
    run.add_argument("--smoke", action="store_true", help="inject the '# smoke:' sizes of the parameters cell")
    run.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per notebook (default 120)")
    run.add_argument("--out", type=Path, default=None, help="output folder")
    run.set_defaults(func=cmd_run)

    listing = sub.add_parser("list", help="list the notebook sources and whether each has a parameters cell")
    listing.add_argument("--path", metavar="NAME", default=None,
                         help="print one course path week by week instead (a name from syllabi/, e.g. distributed-ml)")
    listing.set_defaults(func=cmd_list)

    check = sub.add_parser("check", help="chapter conventions (sections, show, research directions) and notation lint")
    check.add_argument("pattern", nargs="?", help="chapter folder or notebook name: text or glob ('04', '*comm*')")
    check.set_defaults(func=cmd_check)

    release = subparsers.add_parser("release", help="write the student edition (course) or the instructor's solutions manual")
    release.add_argument("what", choices=["course", "solutions"],
                         help="course: chapters, released labs, library; solutions: the manual, instructors only")
    release.add_argument("--out", type=Path, required=True, help="folder to write (replaced whole)")
    release.add_argument("--chapter", default=None, help="solutions: only chapters whose folder starts with this ('07')")
    release.add_argument("--html", action="store_true", help="solutions: also execute each and write its HTML")
    release.set_defaults(func=cmd_release)

    lab = subparsers.add_parser("lab", help="JupyterLab on your workspace: copies of the chapters and labs; the course files never change")
    lab.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: first free from 8888)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.set_defaults(func=cmd_lab)

    from .slides import add_parser as add_slides  # `scaleout slides CHAPTER` (issue 21); light to import

    add_slides(subparsers)
    from .repro import add_parser as add_repro  # `scaleout repro CHAPTER` (issue 21); light to import

    add_repro(subparsers)
    from .site import add_parser as add_site  # `scaleout site build` (issue 36); light to import

    add_site(subparsers)
