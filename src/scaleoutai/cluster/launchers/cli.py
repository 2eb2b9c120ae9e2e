"""``scaleout run`` and ``scaleout doctor`` (Appendix B)."""
from __future__ import annotations

import argparse

from . import SCALES
from ...errors import UserError


def _run(args: argparse.Namespace) -> int:
    from . import run_script

    # argparse cannot mix options after a positional with "-- ARGS", so the part after the script is
    # parsed here: options up to "--" belong to scaleout, everything after it to the script.
    rest = list(args.command)
    cut = rest.index("--") if "--" in rest else len(rest)
    ours, script_args = rest[:cut], rest[cut + 1:]
    if not ours:
        raise UserError("give the script to run, e.g. scaleout run examples/allreduce_check.py")
    again = argparse.ArgumentParser(prog="scaleout run", add_help=False, allow_abbrev=False)
    _add_options(again)
    again.add_argument("script")
    again.set_defaults(**{k: v for k, v in vars(args).items() if k != "command"})
    args, unknown = again.parse_known_args(ours)
    if unknown:
        raise UserError(f"unknown option(s) {' '.join(unknown)}; arguments for the script go "
                        f"after --, e.g. scaleout run {args.script} -- {' '.join(unknown)}")
    env = dict(_parse_env(e) for e in args.env)
    return run_script(args.script, scale=args.scale, workers=args.workers, nodes=args.nodes,
                      gpus_per_node=args.gpus_per_node, script_args=script_args, env=env, dry_run=args.dry_run,
                      timeout=args.timeout, max_restarts=args.max_restarts, address=args.address,
                      job_dir=args.job_dir, partition=args.partition, image=args.image,
                      namespace=args.namespace)


def _parse_env(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise UserError(f"--env {item!r}: write NAME=VALUE")
    return key, value


def _doctor(args: argparse.Namespace) -> int:
    from ..doctor import main

    return main(as_json=args.json)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="run a script that calls cluster.init() at a scale: local, torchrun, slurm, ray, k8s",
        description="Run the same script at every scale. World size = nodes x workers. "
                    "Arguments after -- go to the script.")
    _add_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="SCRIPT [-- ARGS]",
                   help="Python file that calls scaleoutai.cluster.init(), then -- and its arguments")
    p.set_defaults(func=_run)

    d = subparsers.add_parser("doctor", help="what each scale needs and what this machine has",
                              description="A table of what is available here for each scale.")
    d.add_argument("--json", action="store_true", help="print the checks as JSON")
    d.set_defaults(func=_doctor)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", choices=SCALES, default="local")
    p.add_argument("--workers", "-K", type=int, default=2, metavar="K", help="ranks per node (default 2)")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes: torchrun agents, Slurm nodes")
    p.add_argument("--gpus-per-node", type=int, default=0, metavar="G", help="GPUs to request per node")
    p.add_argument("--max-restarts", type=int, default=0, help="torchrun elastic restarts (torchrun, slurm)")
    p.add_argument("--address", default=None, help="existing Ray cluster (default RAY_ADDRESS or a local Ray)")
    p.add_argument("--job-dir", default=None, help="slurm: folder for the sbatch script and output "
                                                   "(default ./slurm-jobs)")
    p.add_argument("--partition", default=None, help="slurm partition")
    p.add_argument("--image", default=None, help="k8s: container image with the course installed "
                                                 "(default scaleout-ai-student:0.1.0)")
    p.add_argument("--namespace", default=None, help="k8s: namespace (default kubectl's current one)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra variable for every rank")
    p.add_argument("--timeout", type=float, default=None, help="seconds before the whole run is stopped")
    p.add_argument("--dry-run", action="store_true", help="print what would run (slurm: the sbatch script, "
                                                                 "k8s: the manifests)")
