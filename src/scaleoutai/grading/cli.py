"""``scaleout assign`` and ``scaleout grade`` (and ``scaleout grade export-gradescope`` / ``similarity``)."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..errors import UserError


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value
    return parse


def register(subparsers: argparse._SubParsersAction) -> None:
    a = subparsers.add_parser("assign", help="write the student release of a lab (stubs + public tests)")
    a.add_argument("lab", help="lab01, 04 or lab04-ring-allreduce")
    a.add_argument("--out", type=Path, default=Path("release"), help="folder for the release (default: release/)")
    a.set_defaults(func=_assign)

    g = subparsers.add_parser("grade", help="grade submissions in a sandbox; or: grade export-gradescope LAB --out ZIP",
                              description="scaleout grade LAB SUBMISSION... | scaleout grade export-gradescope LAB --out ZIP"
                                          " | scaleout grade export-canvas LAB [RESULTS_DIR] --out CSV [--canvas-id N]"
                                          " | scaleout grade similarity LAB SUBMISSION... --out DIR [--top N]")
    g.add_argument("lab", help="the lab (or 'export-gradescope', 'export-canvas', 'similarity')")
    g.add_argument("submissions", nargs="+", type=Path, help="notebooks, folders holding one, or folders of those")
    g.add_argument("--out", type=Path, default=None, help="results folder (default: grades/<lab>); ZIP for export")
    g.add_argument("--jobs", type=_positive(int), default=1, help="submissions graded at once (default 1)")
    g.add_argument("--timeout", type=_positive(float), default=None, help="seconds per submission (default: rubric)")
    g.add_argument("--memory", type=_positive(int), default=2048, help="MB of address space per process (2048)")
    g.add_argument("--submission-memory", type=_positive(int), default=2048,
                   help="MB of resident memory for a submission as a whole, its processes and files together (2048)")
    g.add_argument("--force", action="store_true", help="grade again submissions that have a results.json")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.add_argument("--similarity", action="store_true", help="after grading, compare the submissions into OUT/similarity")
    g.add_argument("--top", type=_positive(int), default=20, help="similarity: pairs printed and detailed (default 20)")
    g.add_argument("--roster", type=Path, default=None,
                   help="CSV id,name,email[,aliases]: names students, reports who is missing (kept in OUT)")
    g.add_argument("--late-policy", type=Path, default=None,
                   help="YAML: due, per_day, grace_minutes, cap, extensions (kept in OUT)")
    g.add_argument("--times", type=Path, default=None, help="CSV id,submitted: submission times (default: file times)")
    g.add_argument("--canvas-id", default="", help="export-canvas: the Canvas assignment id of the lab's column")
    g.set_defaults(func=_grade)
    _register_manual(subparsers)

    v = subparsers.add_parser("validate", help="run your lab notebook in a clean kernel with its public tests",
                              description="scaleout validate LAB NOTEBOOK: exit 0 when every check passes, 1 if not")
    v.add_argument("lab", help="lab01, 04 or lab04-ring-allreduce")
    v.add_argument("notebook", type=Path, help="your notebook (.ipynb)")
    v.add_argument("--timeout", type=_positive(float), default=600, help="seconds per cell (default 600)")
    v.set_defaults(func=_validate)


def _validate(args: argparse.Namespace) -> int:
    from .labs import find_lab
    from .public import _notebook_cells, validate

    lab = find_lab(args.lab)
    _notebook_cells(args.notebook)  # a bad path: one line, exit 2, before any kernel starts
    print(f"validating {args.notebook} against {lab.name}'s public tests in a clean kernel ...", flush=True)
    ok, lines = validate(lab, args.notebook, args.timeout)
    print("\n".join(lines))
    print("ready to hand in" if ok else "not ready: fix the lines above, then validate again")
    return 0 if ok else 1


def _assign(args: argparse.Namespace) -> int:
    from .labs import assign, find_lab

    dest = assign(find_lab(args.lab), args.out)
    print(f"release written to {dest}")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from .labs import find_lab

    if args.lab == "export-gradescope":
        from .gradescope import export

        if len(args.submissions) != 1 or args.out is None or args.out.suffix != ".zip":
            raise UserError("usage: scaleout grade export-gradescope LAB --out autograder.zip")
        path = export(find_lab(str(args.submissions[0])), args.out)
        print(f"Gradescope autograder written to {path}")
        return 0
    if args.lab == "export-canvas":
        from .gradebook import export_canvas

        if len(args.submissions) not in (1, 2) or args.out is None or args.out.suffix != ".csv":
            raise UserError("usage: scaleout grade export-canvas LAB [RESULTS_DIR] --out canvas.csv [--canvas-id N]")
        lab = find_lab(str(args.submissions[0]))
        grades = args.submissions[1] if len(args.submissions) == 2 else Path("grades") / lab.name
        print(export_canvas(lab, grades, args.out, args.canvas_id))
        return 0
    if args.lab == "similarity":
        from .similarity import run

        if len(args.submissions) < 2:
            raise UserError("usage: scaleout grade similarity LAB SUBMISSION... --out DIR [--top N]")
        lab = find_lab(str(args.submissions[0]))
        print(run(lab, args.submissions[1:], args.out or Path("grades") / lab.name / "similarity", args.top))
        return 0
    from .runner import grade_batch
    from .jail import Limits

    logging.basicConfig(level=logging.WARNING, format="scaleout: %(message)s")
    lab = find_lab(args.lab)
    timeout = args.timeout
    if timeout is None:
        import yaml

        rubric = lab.grading / "rubric.yaml"
        timeout = float(yaml.safe_load(rubric.read_text()).get("timeout", 60)) if rubric.is_file() else 60.0
    out = args.out or Path("grades") / lab.name
    roster, policy, times = _class_files(args, out)  # every input checked before anything is graded or written
    summary = grade_batch(lab, args.submissions, out, jobs=args.jobs, force=args.force, quiet=args.quiet,
                          limits=Limits(timeout=timeout, memory_mb=args.memory,
                                        submission_mb=args.submission_memory),
                          roster=roster, policy=policy, times=times)
    print(summary.line())
    from .feedback import write_feedback

    pages, book = write_feedback(out, lab.name)
    print(f"feedback: {pages} feedback.html pages beside the results; class statistics: {book}")
    if args.similarity:
        from .similarity import run

        print(run(lab, args.submissions, out / "similarity", args.top))
    return 0


def _class_files(args: argparse.Namespace, out: Path):
    """(roster, late policy, submission times) from ``--roster``, ``--late-policy``, ``--times``, or Nones."""
    from .late import load_policy, load_times
    from .roster import load_roster

    roster = load_roster(args.roster) if args.roster else None
    if roster is None and (args.late_policy or args.times):
        from .roster import saved_roster

        roster = saved_roster(out) if out.is_dir() else None  # ids in the CSVs go through the kept roster
    policy = load_policy(args.late_policy, roster) if args.late_policy else None
    times = load_times(args.times, roster) if args.times else None
    return roster, policy, times


def _register_manual(subparsers: argparse._SubParsersAction) -> None:
    m = subparsers.add_parser("grade-manual", help="grade a lab's manual: rubric items by hand (a score sheet)",
                              description="scaleout grade-manual sheet LAB --out SHEET.csv | "
                                          "scaleout grade-manual merge LAB SHEET.csv")
    sub = m.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    s = sub.add_parser("sheet", help="write the score sheet of every graded student")
    s.add_argument("lab")
    s.add_argument("--out", type=Path, default=None, help="the sheet (default: LAB-manual.csv)")
    s.add_argument("--force", action="store_true", help="replace an existing sheet")
    m2 = sub.add_parser("merge", help="check a filled sheet and merge it into the gradebook")
    m2.add_argument("lab")
    m2.add_argument("sheet", type=Path)
    for p in (s, m2):
        p.add_argument("--grades", type=Path, default=None, help="the results folder (default: grades/<lab>)")
    m.set_defaults(func=_grade_manual)


def _grade_manual(args: argparse.Namespace) -> int:
    from .labs import find_lab
    from .manual import merge_sheet, write_sheet

    lab = find_lab(args.lab)
    grades = args.grades or Path("grades") / lab.name
    if args.action == "sheet":
        print(write_sheet(lab, grades, args.out or Path(f"{lab.name}-manual.csv"), args.force))
    else:
        print(merge_sheet(lab, grades, args.sheet))
        from .feedback import write_feedback

        write_feedback(grades, lab.name)  # the students' pages show the hand-graded points too
    return 0
