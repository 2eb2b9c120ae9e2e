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
                                          " | scaleout grade similarity LAB SUBMISSION... --out DIR [--top N]")
    g.add_argument("lab", help="the lab (or 'export-gradescope', 'similarity')")
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
    g.set_defaults(func=_grade)


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
    summary = grade_batch(lab, args.submissions, out, jobs=args.jobs, force=args.force, quiet=args.quiet,
                          limits=Limits(timeout=timeout, memory_mb=args.memory,
                                        submission_mb=args.submission_memory))
    print(summary.line())
    if args.similarity:
        from .similarity import run

        print(run(lab, args.submissions, out / "similarity", args.top))
    return 0
