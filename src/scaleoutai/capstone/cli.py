"""`scaleout capstone sweep|report`: scaling sweeps tracked in MLflow, and their curves (Chapter 41)."""
from __future__ import annotations

import argparse

from ..errors import CapstoneError
from .prices import DEFAULT_INSTANCE_TYPE

URI_HELP = "MLflow store (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in this folder)"


def _split_script_args(args: argparse.Namespace) -> argparse.Namespace:
    """SCRIPT, sweep options in any order, then ``--`` and the script's own arguments.

    argparse strips or keeps ``--`` depending on where it falls, so the sweep parser collects the
    words after its leading options verbatim and they are split and parsed here."""
    rest = list(args.rest)
    if not rest or rest[0] == "--":
        raise CapstoneError("give the script to sweep: scaleout capstone sweep SCRIPT --workers 1,2 -- ARGS")
    head, tail = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    parser = argparse.ArgumentParser(prog="scaleout capstone sweep", allow_abbrev=False, add_help=False)
    parser.add_argument("script")
    _sweep_options(parser)
    defaults = {k: v for k, v in vars(args).items() if k not in ("rest", "script")}
    parser.set_defaults(**defaults)
    ns, unknown = parser.parse_known_args(head, namespace=argparse.Namespace())
    if unknown:
        raise CapstoneError(f"unrecognized sweep arguments {unknown}; the script's own arguments go "
                            "after --, e.g. scaleout capstone sweep SCRIPT --workers 1,2 -- --n 20000")
    ns.script_args = tail
    return ns


def _sweep(args: argparse.Namespace) -> int:
    from .sweep import summary, sweep

    args = _split_script_args(args)
    result = sweep(args.script, workers=args.workers, scale=args.scale, experiment=args.experiment,
                   instance_type=args.instance_type, repeats=args.repeats, script_args=args.script_args,
                   baseline=args.baseline, uri=args.tracking_uri, nodes=args.nodes,
                   gpus_per_node=args.gpus_per_node, timeout=args.timeout, progress=not args.no_progress)
    print(summary(result))
    print(f"next: scaleout capstone report --experiment {result.experiment}"
          + (f" --tracking-uri {args.tracking_uri}" if args.tracking_uri else ""))
    return 0 if result.ok else 1


def _report(args: argparse.Namespace) -> int:
    from .report import report

    rep = report(args.experiment, out=args.out, uri=args.tracking_uri, template=args.template)
    print(rep.table)
    print(f"wrote {rep.png} and {rep.markdown}")
    return 0


def _sweep_options(sw: argparse.ArgumentParser) -> None:
    sw.add_argument("--workers", default="1,2,4", help="worker counts K, comma-separated (default 1,2,4)")
    sw.add_argument("--scale", default="local", help="launcher scale: local, torchrun, slurm or ray (default local)")
    sw.add_argument("--experiment", help="MLflow experiment name (default: the script's name)")
    sw.add_argument("--instance-type", default=DEFAULT_INSTANCE_TYPE,
                    help="price the runs as this type from capstone/prices.yaml (default local-laptop)")
    sw.add_argument("--repeats", type=int, default=1, help="runs per K, interleaved; the report takes medians")
    sw.add_argument("--baseline", help="single-machine baseline script, run first in each repeat (T_1)")
    sw.add_argument("--nodes", type=int, default=1, help="nodes for the slurm and cloud scales")
    sw.add_argument("--gpus-per-node", type=int, default=0, help="GPUs per node for the gpu scale")
    sw.add_argument("--timeout", type=float, default=None, help="seconds before a run is stopped")
    sw.add_argument("--tracking-uri", help=URI_HELP)
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `scaleout capstone sweep` and `scaleout capstone report`."""
    cap = subparsers.add_parser("capstone", help="capstone: tracked scaling sweeps and speedup-cost reports",
                                description="Chapter 41: sweep world sizes with every run tracked in MLflow, "
                                            "then report speedup, efficiency and cost.")
    sub = cap.add_subparsers(dest="capstone_command", metavar="{sweep,report}")
    sub.required = True

    sw = sub.add_parser("sweep", help="run SCRIPT at several worker counts, each run tracked", allow_abbrev=False,
                        usage="scaleout capstone sweep SCRIPT --workers 1,2,4 [options] [-- SCRIPT_ARGS]")
    sw.add_argument("rest", nargs=argparse.REMAINDER, metavar="SCRIPT [-- SCRIPT_ARGS]",
                    help="a script that calls cluster.init() and capstone.track(), then its arguments after --")
    _sweep_options(sw)
    sw.set_defaults(func=_sweep)

    rp = sub.add_parser("report", help="speedup, efficiency and cost curves of an experiment")
    rp.add_argument("--experiment", required=True, help="MLflow experiment name")
    rp.add_argument("--out", default=".", help="folder for report.png and report.md (default .)")
    rp.add_argument("--tracking-uri", help=URI_HELP)
    rp.add_argument("--template", help="report template (default capstone/REPORT_TEMPLATE.md)")
    rp.set_defaults(func=_report)

