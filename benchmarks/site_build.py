"""The whole course website, built three times: cold, warm (every chapter cached), and after one chapter changed.

    python benchmarks/site_build.py                 # smoke sizes, cache in a temporary folder
    python benchmarks/site_build.py --full          # lesson sizes, as a published site
    python benchmarks/site_build.py --out _build/site --cache ~/.cache/scaleout-ai/site

Prints the table of chapter times of the cold build, then the wall time of the cold build, of a warm
rebuild (nothing executes: the cache hits for every chapter), and of a rebuild after touching one chapter
(only that one executes), with the machine. Issue 36: CI builds two chapters; this is the whole site.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _timed(**kwargs) -> float:
    from scaleoutai.notebooks.site import build_site

    start = time.perf_counter()
    build_site(**kwargs)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="lesson sizes instead of smoke sizes")
    parser.add_argument("--out", type=Path, default=None, help="where to leave the site (default: a temp folder)")
    parser.add_argument("--cache", type=Path, default=None, help="executed-notebook cache (default: a temp folder)")
    parser.add_argument("--touch", default="03-", help="the chapter to edit before the third build")
    args = parser.parse_args(argv)
    from scaleoutai.notebooks import find_sources

    with tempfile.TemporaryDirectory(prefix="site-bench-") as tmp:
        out, cache = args.out or Path(tmp) / "site", args.cache or Path(tmp) / "cache"
        common = {"out": out, "smoke": not args.full, "cache": cache}
        cold = _timed(**common)
        warm = _timed(**common, progress=False)
        source = find_sources(pattern=args.touch)[0]
        original = source.read_text()
        try:  # a comment-only edit still changes the chapter's hash: it executes again, alone
            source.write_text(original + "\n# touched by benchmarks/site_build.py\n")
            one = _timed(**common, progress=False)
        finally:
            source.write_text(original)
        pages = len(list(out.rglob("*.html")))
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
        print(f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; {'full' if args.full else 'smoke'} sizes")
        print(f"cold build {cold:.0f} s | warm rebuild {warm:.0f} s | one chapter changed ({source.parent.name}) "
              f"{one:.0f} s | {pages} pages, {size:.0f} MiB")
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
