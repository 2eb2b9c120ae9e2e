"""Output that native code writes straight to file descriptor 2 (C++ profilers, JVMs), kept out of a cell.

Python's ``contextlib.redirect_stderr`` swaps ``sys.stderr`` and misses such output: the bytes go to the
process's descriptor 2, which Jupyter's kernel forwards into the cell. ``native_stderr()`` points
descriptor 2 at a temporary file for the duration of the block and hands back what was written
(Chapter 3, Section 5: torch.profiler's library prints a line when a trace starts and stops).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator


@dataclass
class Captured:
    """What the block wrote to descriptor 2; filled in when the block ends."""

    text: str = ""


@contextlib.contextmanager
def native_stderr() -> Iterator[Captured]:
    """Capture what is written to descriptor 2 during the block (not Python's ``sys.stderr`` where that is
    another stream, as in a Jupyter kernel: warnings still show)."""
    captured = Captured()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")
