"""The hidden-test kit: tolerances, type/dtype/shape checks, static checks."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.grading.checks import Case, CaseResult, Fail, close, forbidden_calls


def _res(value_meta, arrays, K=1):
    return CaseResult(Case(id="c", fn="f", label="l", world_size=K), {"ok": True, "ranks": [value_meta]}, arrays)


def test_close_accepts_within_tolerance_and_names_the_error_otherwise():
    close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]), 1e-6, 0, "x")
    with pytest.raises(Fail, match="wrong in 1 of 2 entries"):
        close(np.array([1.0, 2.5]), np.array([1.0, 2.0]), 1e-6, 0, "x")
    with pytest.raises(Fail):
        close(np.array([np.nan]), np.array([1.0]), 1, 1, "x")


def test_value_checks_type_dtype_and_shape_with_teaching_messages():
    ok = {"type": "ndarray", "stored": True}
    assert _res(ok, {"r0": np.zeros(3)}).value(0, "sum", dtype="float64", shape=(3,)).shape == (3,)
    with pytest.raises(Fail, match="dtype float32, expected float64"):
        _res(ok, {"r0": np.zeros(3, np.float32)}).value(0, "sum", dtype="float64")
    with pytest.raises(Fail, match=r"shape \(2,\), expected \(3,\)"):
        _res(ok, {"r0": np.zeros(2)}).value(0, "sum", shape=(3,))
    with pytest.raises(Fail, match="is a list; return a NumPy array"):
        _res({"type": "list", "stored": True}, {"r0": np.zeros(2)}).value(0, "sum")
    with pytest.raises(Fail, match="crashed"):
        _res({"type": "crashed", "crashed": True}, {}).value(0, "sum")


def test_stats_must_be_whole_non_negative_counts():
    res = CaseResult(Case(id="c", fn="f", label="l"), {"stats": [{"messages_sent": -1}]}, {})
    with pytest.raises(Fail, match="malformed"):
        res.stats(0)


def test_forbidden_calls_finds_imports_and_collective_shortcuts():
    src = "import torch.distributed as dist\nfrom scaleoutai.collectives import x\ndef f(c, v):\n    return dist.all_reduce(v)"
    assert forbidden_calls(src, ("torch.distributed", "scaleoutai.collectives"), ("all_reduce",)) == [
        ".all_reduce", "from scaleoutai.collectives import ...", "import torch.distributed"]
    assert forbidden_calls("def f(comm, x):\n    comm.send(x, 1)", ("torch",), ("all_reduce",)) == []
