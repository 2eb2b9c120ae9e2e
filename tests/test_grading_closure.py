"""A lab's unimportable list is closed over the course's import graph: every module that reaches a
forbidden one is stubbed too, so a fake entry in ``sys.modules`` opens no path to the answer."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import scaleoutai
from scaleoutai.grading.checks import Case, Plan
from scaleoutai.grading.closure import closure_files, course_modules, import_graph, reaching
from scaleoutai.grading.engine import unimportable_files
from scaleoutai.grading.hub import SubmissionRun
from scaleoutai.grading.jail import Limits, import_roots, probe_mode
from scaleoutai.grading.labs import list_labs
from scaleoutai.grading.sandbox import UID_BASE
from scaleoutai.grading.zygote import Zygote

ROOT = Path(__file__).resolve().parents[1]
PKG = os.path.dirname(scaleoutai.__file__)


def _package(tmp_path: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        p = tmp_path / "pkg" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path / "pkg")


def test_closure_follows_relative_lazy_dynamic_and_parent_package_imports(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "answer.py": "X = 1\n",
        "direct.py": "from . import answer\n",
        "lazy.py": "def f():\n    from pkg.answer import X\n    return X\n",
        "dynamic.py": "import importlib\nm = importlib.import_module('pkg.answer')\n",
        "chain.py": "from .direct import *\n",
        "clean.py": "import numpy\n",
        "sub/__init__.py": "from ..answer import X\n",
        "sub/leaf.py": "Y = 2\n",  # importing pkg.sub.leaf runs pkg/sub/__init__.py first
        "other/__init__.py": "",
        "other/deep.py": "from ...pkg import answer\n",
    })
    bad = reaching(import_graph(course_modules(pkg)), ("pkg.answer",))
    assert bad == {"pkg.answer", "pkg.direct", "pkg.lazy", "pkg.dynamic", "pkg.chain", "pkg.sub", "pkg.sub.leaf"}
    files = dict(closure_files(("pkg.answer",), pkg))
    assert files["pkg.sub"].endswith(os.path.join("sub", "__init__.py")) and "pkg.clean" not in files


def test_a_forbidden_package_is_stubbed_whole_and_its_modules_not_one_by_one(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "ans/__init__.py": "from .a import *\n", "ans/a.py": "",
                              "user.py": "import pkg.ans.a\n"})
    assert closure_files(("pkg.ans",), pkg) == [["pkg.ans", os.path.join(pkg, "ans")],
                                               ["pkg.user", os.path.join(pkg, "user.py")]]


GRAPH = import_graph(course_modules(PKG))


def test_the_course_closure_reaches_other_parts_but_never_what_the_sandbox_runs_on():
    bad = reaching(GRAPH, ("scaleoutai.collectives",))
    assert "scaleoutai.cases.clinical_fl" in bad  # the federated answer of lab 14, outside scaleoutai.ml
    for needed in ("scaleoutai", "scaleoutai.cluster", "scaleoutai.cluster.core", "scaleoutai.nn",
                   "scaleoutai.grading.rank", "scaleoutai.grading.sandbox", "scaleoutai.errors"):
        assert needed not in bad


SANDBOX = ("scaleoutai.grading.rank", "scaleoutai.grading.sandbox", "scaleoutai.cluster._worker",
           "scaleoutai.cluster.process")  # what the zygote loads before any stub exists


@pytest.mark.parametrize("lab_name", list_labs(ROOT))
def test_no_lab_stubs_a_module_its_own_solution_or_the_sandbox_imports(lab_name):
    import ast

    from scaleoutai.grading.engine import load_hidden
    from scaleoutai.grading.labs import find_lab

    lab = find_lab(lab_name, ROOT)
    stubbed = {name for name, _ in unimportable_files(load_hidden(lab), import_roots())}
    graph = GRAPH
    used = {n.module for n in ast.walk(ast.parse(lab.source.read_text())) if isinstance(n, ast.ImportFrom)}
    todo = [*used, *SANDBOX]
    while todo:  # everything the solution and the sandbox load, transitively
        for t in graph.get(todo.pop(), ()):
            if t in graph and t not in used:
                used.add(t)
                todo.append(t)
    assert not stubbed & used, f"{lab_name} stubs what it needs: {sorted(stubbed & used)}"


DODGE = '''
import sys, types, numpy as np
fake = types.ModuleType("scaleoutai.collectives")
fake.worker_range = lambda rank, K, n: (0, n)
sys.modules["scaleoutai.collectives"] = fake
for name in ("scaleoutai.ml", "scaleoutai.parallel"):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = []

def dodge():
    try:
        import scaleoutai.cases.clinical_fl  # noqa: F401 - its own federated averaging: lab 14's answer
    except ImportError as exc:
        return np.array([2.0 if "holds or imports the course library's answer" in str(exc) else 0.0])
    return np.array([1.0])

def read_source():
    import scaleoutai.cases
    path = scaleoutai.cases.__path__[0] + "/clinical_fl.py"
    return np.array([1.0 if "def " in open(path).read() else 0.0])
'''


@pytest.mark.timeout(180)
def test_a_fake_module_in_sys_modules_no_longer_unlocks_the_course_answer(tmp_path):
    if os.geteuid() != 0 or probe_mode() != "full":
        pytest.skip("the stubs are mounts: they need root and mount namespaces")
    zygote = Zygote("full")
    hidden = SimpleNamespace(module=SimpleNamespace(UNIMPORTABLE=("scaleoutai.ml", "scaleoutai.collectives",
                                                                  "scaleoutai.parallel")))
    limits = Limits(timeout=60, mode="full", unimportable=unimportable_files(hidden, zygote.roots))
    plan = Plan()
    for fn in ("dodge", "read_source"):
        plan.add(Case(id=fn, fn=fn, label=fn, mode="call"))
    sub = SubmissionRun(zygote, "d", list(range(UID_BASE + 3200, UID_BASE + 3216)), None, str(tmp_path / "d"),
                        limits, [{"source": DODGE, "skip": False}], plan)
    try:
        out = {c.id: sub.run(c) for c in plan.cases}
    finally:
        sub.close()
        zygote.close()
    assert out["dodge"].meta["ok"] and float(out["dodge"].arrays["r0"][0]) == 2.0  # refused, with the reason
    assert out["read_source"].meta["ok"] and float(out["read_source"].arrays["r0"][0]) == 0.0  # the file is the stub
