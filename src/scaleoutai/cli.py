"""The ``scaleout`` command. Each part of the course registers its own subcommands here."""
from __future__ import annotations

import argparse
import importlib
import sys

from scaleoutai.errors import UserError, interrupted

# module path -> its ``register(subparsers)`` function adds one or more subcommands.
COMMANDS = [
    "scaleoutai.notebooks",
    "scaleoutai.cluster.launchers.cli",
    "scaleoutai.capstone.cli",
    "scaleoutai.grading.cli",
]


def build_parser() -> argparse.ArgumentParser:
    from scaleoutai import __version__

    parser = argparse.ArgumentParser(prog="scaleout", description="Courseware for 'Scaling Out AI'.")
    parser.add_argument("--version", action="version", version=f"scaleout-ai {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"scaleout: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.filename is None:  # not about a path the user gave: a bug, keep its traceback
            raise
        print(f"scaleout: error: cannot use {exc.filename}: {exc.strerror or exc} (give a folder you can write "
              f"to, whose parent exists)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scaleout: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if interrupted(exc):  # a library turned Ctrl-C into its own error (nbclient's cleanup does)
            print("scaleout: interrupted", file=sys.stderr)
            return 130
        raise



if __name__ == "__main__":
    sys.exit(main())
