"""Ctrl-C during a long command: one line "scaleout: interrupted", exit status 130, no traceback, and
nothing half-written at the path the user gave (issue 35). The interrupt lands wherever the command is
(kernel start-up, a cell running, rendering): the outcome must be the same."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scaleoutai.errors import interrupted

REPO = Path(__file__).resolve().parents[1]

LONG = {
    "solutions --html": ["release", "solutions", "--chapter", "03", "--html", "--out"],
    "slides": ["slides", "03", "--out"],
    "repro": ["repro", "03", "--out"],
    "site build": ["site", "build", "--chapters", "03", "--out"],
}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", list(LONG))
def test_ctrl_c_prints_one_line_exits_130_and_writes_nothing(name, tmp_path, after=8.0):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "scaleoutai.cli", *LONG[name], str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after)
    if proc.poll() is not None:
        pytest.fail(f"{name} ended before the interrupt: {proc.communicate()[1][-500:]}")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip() and "it/s]" not in ln
             and "ch/s" not in ln and not ln.startswith("executing ")]  # progress bars and the start line
    assert proc.returncode == 130, f"{name}: exit status {proc.returncode}\n{err[-2000:]}"
    assert lines == ["scaleout: interrupted"], f"{name}: stderr after Ctrl-C:\n{err[-2000:]}"
    assert not out.exists(), f"{name} left {out} behind after Ctrl-C"


def test_an_interrupt_is_found_behind_the_error_a_library_turned_it_into():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise AssertionError  # nbclient's kernel clean-up does this
    except AssertionError as exc:
        assert interrupted(exc)
    assert not interrupted(ValueError("boom")) and not interrupted(None)
    looped = RuntimeError("a")
    looped.__context__ = RuntimeError("b")
    looped.__context__.__context__ = looped  # a cycle must not hang the check
    assert not interrupted(looped)
