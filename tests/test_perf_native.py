"""perf.native_stderr keeps what native code writes to descriptor 2 out of the output and hands it back."""
from __future__ import annotations

import os

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


def test_torch_profiler_start_and_stop_lines_are_kept_out(capfd):
    import torch
    from torch.profiler import ProfilerActivity, profile

    with perf.native_stderr() as native, profile(activities=[ProfilerActivity.CPU]):
        torch.ones(4).sum()
    assert "profiler_start" in native.text  # what torch 2.13's profiler writes, now in our hands
    assert capfd.readouterr().err == ""
