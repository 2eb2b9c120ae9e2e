"""The kit hidden tests are written with; it runs in the grader's process only.

A hidden test module (``grading/labNN-slug/tests.py``) defines ``plan(rng) -> Plan`` (what to run in
the sandbox, with seeded inputs) and ``TESTS`` (what to grade). A check gets a ``CaseResult`` and
returns ``(fraction, message)``; it raises ``Fail`` with a teaching message for a wrong answer. Messages
describe the case (world size, length, dtype) and the error, never the reference values.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


MAX_NDIM = 8  # the most dimensions an array a rank sends may have (the grader refuses more)


def envelope_bytes(ndim: int) -> int:
    """Bytes the grader charges for one message's header: 8 for the dtype and rank count, 8 per dimension.

    A shape is information the sender chooses (a zero-size array of shape (0, b1, ..., b7) carries 56 bytes),
    so it is counted in ``bytes_sent`` like the payload: a message of an n-element 1-D array costs
    ``n * itemsize + envelope_bytes(1)`` = n * itemsize + 16 bytes. Byte bounds in hidden tests add one
    envelope per message they allow (grading/README.md, "Guarantees")."""
    return 8 * (1 + int(ndim))


class Fail(Exception):
    """A check failed; the message is shown to the student."""


class NotGraded(Fail):
    """The case cannot be graded for this property until another test's mistake is fixed: it counts
    neither for nor against the test (one mistake loses its points once), and the message says so."""


def graded_after(check: Callable[[], object], what: str) -> None:
    """Run ``check`` (a correctness check); if it fails, this case is NotGraded for the calling test.

    Properties such as traffic or memory are graded only on cases whose values are right, so a rank that
    sends well-shaped messages without computing anything gains nothing, and a wrong value is not
    charged twice."""
    try:
        check()
    except NotGraded:
        raise
    except Fail:
        raise NotGraded(f"graded once {what} is right; the test of {what} says what is wrong") from None


@dataclass
class Case:
    id: str
    fn: str  # the student's function
    label: str  # what the student sees: "K=5, n=13, float32, simulator"
    mode: str = "spmd"  # "spmd": fn(comm, *args) on every rank; "call": fn(*args)
    args: list[dict] = field(default_factory=list)
    world_size: int = 1
    backend: str = "sim"
    faults: dict = field(default_factory=dict)
    timeout: float = 15.0
    data: dict = field(default_factory=dict)  # grader-only facts (never sent to the sandbox)

    def public(self) -> dict:
        return {"id": self.id, "fn": self.fn, "mode": self.mode, "args": self.args, "world_size": self.world_size,
                "backend": self.backend, "faults": self.faults, "timeout": self.timeout}


@dataclass
class Plan:
    cases: list[Case] = field(default_factory=list)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, case: Case, shared: dict[str, np.ndarray] | None = None,
            per_rank: dict[str, list[np.ndarray]] | None = None) -> Case:
        """Register a case; its arguments are ``shared`` arrays (same on every rank) and ``per_rank`` lists."""
        for name, arr in (shared or {}).items():
            self.inputs[f"{case.id}/{name}"] = arr
            case.args.append({"key": f"{case.id}/{name}"})
        for name, arrs in (per_rank or {}).items():
            for r, arr in enumerate(arrs):
                self.inputs[f"{case.id}/{name}/{r}"] = arr
            case.args.append({"key": f"{case.id}/{name}", "per_rank": True})
        self.cases.append(case)
        return case

    def add_in_order(self, case: Case, items: list[tuple[str, object]]) -> Case:
        """Register a case whose arguments come in call order: ``(name, array)`` shared by every rank,
        ``(name, [array per rank])``, or ``("=", json_value)`` passed as a plain value."""
        for name, value in items:
            if name == "=":
                case.args.append({"value": value})
            elif isinstance(value, list):
                for r, arr in enumerate(value):
                    self.inputs[f"{case.id}/{name}/{r}"] = arr
                case.args.append({"key": f"{case.id}/{name}", "per_rank": True})
            else:
                self.inputs[f"{case.id}/{name}"] = value
                case.args.append({"key": f"{case.id}/{name}"})
        self.cases.append(case)
        return case

    def shared(self, case: Case, name: str) -> np.ndarray:
        return self.inputs[f"{case.id}/{name}"]

    def per_rank(self, case: Case, name: str) -> list[np.ndarray]:
        return [self.inputs[f"{case.id}/{name}/{r}"] for r in range(case.world_size)]


@dataclass
class CaseResult:
    """What came back for one case, validated on access."""

    case: Case
    meta: dict
    arrays: dict[str, np.ndarray]
    plan: Plan = field(default_factory=Plan)
    source: str = ""  # the student's code, for static checks
    trace: list = field(default_factory=list)  # the grader's TraceEvents: who sent what to whom, when
    messages: list = field(default_factory=list)  # (src, dst, payload) when the case records them

    def per_rank(self, name: str) -> list[np.ndarray]:
        """The grader's own copy of a per-rank input (never what came back from the sandbox)."""
        return self.plan.per_rank(self.case, name)

    def shared(self, name: str) -> np.ndarray:
        return self.plan.shared(self.case, name)

    def stats(self, rank: int) -> dict[str, int]:
        """Rank ``rank``'s messages and bytes as the grader counted them (never the student's comm.stats)."""
        stats = self.meta.get("stats")
        if not isinstance(stats, list) or len(stats) != self.case.world_size or not isinstance(stats[rank], dict):
            raise Fail("the communicator statistics did not come back")
        out = {}
        for k in ("messages_sent", "bytes_sent", "messages_received", "bytes_received"):
            v = stats[rank].get(k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise Fail(f"rank {rank}'s statistics are malformed")
            out[k] = v
        return out

    def crashed(self, rank: int) -> bool:
        ranks = self.meta.get("ranks")
        return isinstance(ranks, list) and rank < len(ranks) and isinstance(ranks[rank], dict) \
            and ranks[rank].get("crashed") is True

    def value(self, rank: int, what: str, dtype: Any = None, shape: tuple | None = None,
              array_only: bool = True) -> np.ndarray:
        """Rank ``rank``'s return value as an array, after checking its type, dtype and shape."""
        ranks = self.meta.get("ranks")
        if not isinstance(ranks, list) or len(ranks) <= rank or not isinstance(ranks[rank], dict):
            raise Fail(f"no return value came back from rank {rank}")
        info = ranks[rank]
        if info.get("crashed") is True:
            raise Fail(f"rank {rank} crashed before returning {what}")
        kind = str(info.get("type", "?"))[:40]
        arr = self.arrays.get(f"r{rank}")
        if array_only and kind != "ndarray":
            raise Fail(f"rank {rank}'s {what} is a {kind}; return a NumPy array (np.ndarray)")
        if arr is None or not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biufc":
            note = str(info.get("note", ""))[:80]
            raise Fail(f"rank {rank}'s {what} is a {kind}{' that ' + note if note else ''}; return a NumPy array")
        if shape is not None and tuple(arr.shape) != tuple(shape):
            raise Fail(f"rank {rank}'s {what} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
        if dtype is not None and arr.dtype != np.dtype(dtype):
            raise Fail(f"rank {rank}'s {what} has dtype {arr.dtype}, expected {np.dtype(dtype)} "
                       f"(keep the input's dtype)")
        return arr


def close(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float, what: str) -> None:
    """Raise Fail unless |got - ref| <= atol + rtol*|ref| everywhere (NaN never passes)."""
    got64, ref64 = got.astype(np.float64), ref.astype(np.float64)
    err = np.abs(got64 - ref64)
    bad = ~(err <= atol + rtol * np.abs(ref64))
    if bad.any():
        worst = float(np.nanmax(np.where(np.isfinite(err), err, np.inf)))
        raise Fail(f"{what} is wrong in {int(bad.sum())} of {bad.size} entries (largest error {worst:.3g}, "
                   f"tolerance {atol:g} + {rtol:g}*|expected|)")


SOURCE_CAP = 256 * 1024  # the grader parses no more student code than this


@functools.lru_cache(maxsize=8)
def forbidden_calls(source: str, modules: tuple[str, ...], names: tuple[str, ...]) -> list[str]:
    """Imports of ``modules`` and attribute calls named ``names`` found in the student's code.

    A friendly early message only: the sandbox makes the forbidden modules unimportable. Parsed once
    per submission (cached) and never beyond SOURCE_CAP characters, so a huge notebook cannot stall
    the grader."""
    if len(source) > SOURCE_CAP:
        return [f"code of {len(source) >> 10} KB, more than the {SOURCE_CAP >> 10} KB the check reads"]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"a syntax error on line {exc.lineno}"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith(modules)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(modules):
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.append(f".{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ("__import__", "importlib"):
            found.append(node.id)
    return sorted(set(found))


@dataclass
class Test:
    """One graded test: ``key`` looks up points and visibility in rubric.yaml."""

    key: str
    name: str
    select: Callable[[Case], bool] | None = None  # the cases it grades
    check: Callable[[CaseResult], tuple[float, str] | float] | None = None
    static: Callable[[str], tuple[float, str]] | None = None  # graded from the source instead
