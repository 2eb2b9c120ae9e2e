"""perf.native_stderr keeps what native code writes to descriptor 2 out of the output and hands it back."""
from __future__ import annotations

import os
import sys

from scaleoutai import perf


def test_native_writes_to_descriptor_two_are_captured_and_the_descriptor_restored(capfd):
    with perf.native_stderr() as native:
        os.write(2, b"from C\n")
    os.write(2, b"after\n")
    assert native.text == "from C\n"
    assert capfd.readouterr().err == "after\n"


def test_the_descriptor_is_restored_when_the_block_raises(capfd):
    try:
        with perf.native_stderr() as native:
            os.write(2, b"before the error\n")
            raise KeyError("x")
    except KeyError:
        pass
    os.write(2, b"visible\n")
    assert native.text == "before the error\n" and capfd.readouterr().err == "visible\n"


def test_torch_profiler_start_and_stop_lines_are_kept_out():
    import subprocess

    code = ("import torch; from scaleoutai import perf; from torch.profiler import profile, ProfilerActivity\n"
            "with perf.native_stderr() as n, profile(activities=[ProfilerActivity.CPU]):\n"
            "    torch.ones(4).sum()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
