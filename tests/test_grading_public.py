"""Public tests as named checks (`scaleoutai.grading.public`), the labs' converted public tests, and
`scaleout validate LAB NOTEBOOK`."""
from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from scaleoutai.cli import main
from scaleoutai.grading.labs import assign, find_lab, list_labs
from scaleoutai.grading.public import ENV_JSON, ChecksFailed, check, collect, run_checks

ROOT = Path(__file__).resolve().parents[1]
REDESIGN = {"lab04-ring-allreduce"}  # being redesigned elsewhere: still one run_public_tests function
LABS = [n for n in list_labs(ROOT) if n not in REDESIGN]


def _module(tmp_path: Path, text: str, name: str = "pt_demo") -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DEMO = '''
from scaleoutai.grading.public import check

NOTE = "public tests passed; the grader runs more"


@check
def adds(add):
    """add is +"""
    assert add(1, 2) == 3, "add(1, 2) should be 3"


@check("no message")
def bare(add):
    assert add(0, 0) == 1


@check
def subtracts(sub):
    assert sub(3, 1) == 2, "sub(3, 1) should be 2"
'''


def _add(a, b):
    return a + b


def _broken_sub(a, b):
    return {}[a]  # a KeyError deep in the student's code


def test_run_checks_runs_every_check_prints_n_of_m_and_one_line_per_failure(tmp_path):
    mod = _module(tmp_path, DEMO)
    out = io.StringIO()
    with pytest.raises(ChecksFailed, match="2 of 3 checks failed: no message, subtracts"):
        run_checks(mod, {"add": _add, "sub": _broken_sub}, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "1 of 3 checks passed"
    assert lines[1] == "  FAILED no message: assertion failed: assert add(0, 0) == 1"
    assert re.fullmatch(r"  FAILED subtracts: KeyError \(in _broken_sub, line \d+\): 3", lines[2])
    assert len(lines) == 3 and "Traceback" not in out.getvalue() and "NOTE" not in out.getvalue()


def test_all_passing_prints_the_summary_and_the_note_and_raises_nothing(tmp_path):
    mod = _module(tmp_path, DEMO.replace("add(0, 0) == 1", "add(0, 0) == 0"))
    out = io.StringIO()
    outcomes = run_checks(mod, {"add": _add, "sub": lambda a, b: a - b}, out=out)
    assert out.getvalue() == "3 of 3 checks passed\npublic tests passed; the grader runs more\n"
    assert [o.name for o in outcomes] == ["adds", "no message", "subtracts"] and outcomes[0].about == "add is +"


def test_a_name_the_notebook_lacks_fails_that_check_only_with_a_hint(tmp_path):
    mod = _module(tmp_path, DEMO)
    out = io.StringIO()
    with pytest.raises(ChecksFailed):
        run_checks(mod, {"add": _add}, out=out)
    assert "  FAILED subtracts: the notebook does not define sub: run the cells above" in out.getvalue()
    assert out.getvalue().startswith("1 of 3 checks passed")


def test_only_runs_the_named_checks_and_an_unknown_name_lists_the_checks(tmp_path):
    mod = _module(tmp_path, DEMO)
    out = io.StringIO()
    assert len(run_checks(mod, {"add": _add}, "adds", out=out)) == 1
    assert out.getvalue().startswith("1 of 1 checks passed")
    with pytest.raises(ValueError, match="no check named 'nope'; the checks are adds, no message, subtracts"):
        run_checks(mod, {}, "nope")


def test_a_check_that_exits_or_raises_a_stub_error_is_reported_not_fatal():
    notebook: dict = {}  # the student's functions live in notebook cells, not in the public tests' file
    exec(compile("def stub(x):\n    raise NotImplementedError('write your solution here')\n\n"  # noqa: S102
                 "def leaves(x):\n    raise SystemExit(3)\n", "<cell 4>", "exec"), notebook)
    out = io.StringIO()
    with pytest.raises(ChecksFailed):
        run_checks([check(lambda stub: stub(1), name="stub"), ("exit", lambda leaves: leaves(1))], notebook, out=out)
    text = out.getvalue()
    assert "FAILED stub: NotImplementedError (in stub, line" in text and "write your solution here" in text
    assert "FAILED exit: SystemExit (in leaves, line" in text


def test_the_outcome_is_written_as_json_when_the_environment_asks(tmp_path, monkeypatch):
    mod = _module(tmp_path, DEMO)
    monkeypatch.setenv(ENV_JSON, str(tmp_path / "checks.json"))
    with pytest.raises(ChecksFailed):
        run_checks(mod, {"add": _add, "sub": _broken_sub}, out=io.StringIO())
    got = json.loads((tmp_path / "checks.json").read_text())
    assert (got["passed"], got["total"]) == (1, 3)
    assert [c["passed"] for c in got["checks"]] == [True, False, False]


# ------------------------------------------------------------------ the labs' converted public tests


def _lab_module(name: str) -> ModuleType:
    sys.modules.pop("public_tests", None)
    spec = importlib.util.spec_from_file_location(f"public_tests_{name[:5]}", ROOT / "labs" / name / "public_tests.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _top_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


@pytest.mark.parametrize("name", LABS)
def test_each_lab_has_named_checks_over_names_its_notebook_defines(name):
    mod = _lab_module(name)
    checks = collect(mod)
    assert len(checks) >= 2, "split the public tests into their natural checks"
    assert not hasattr(mod, "run_public_tests") and isinstance(getattr(mod, "NOTE", None), str)
    source = (ROOT / "labs" / name / f"{name}.py").read_text()
    defined = _top_level_names(source)
    for check_name, fn in checks:
        params = list(__import__("inspect").signature(fn).parameters)
        assert params and set(params) <= defined, f"{check_name} takes {params}; the notebook defines those names"
    cell = re.search(r'# %% tags=\["public-tests"\]\n(.*?)(?=\n# %%|\Z)', source, re.S).group(1)
    assert "run_checks(public_tests, globals())" in cell and "import public_tests" in cell


@pytest.mark.parametrize("name", LABS)
def test_a_blank_release_fails_every_check_with_one_line_each(name):
    """The stubs raise NotImplementedError: every check fails, each with one line, none stops the others."""
    from scaleoutai.grading.labs import strip_solutions

    text, _ = strip_solutions((ROOT / "labs" / name / f"{name}.py").read_text())
    cells = [c for c in text.split("# %%") if "tags=[\"public-tests\"]" not in c]
    namespace: dict = {}
    for c in cells[1:]:  # the definitions only; the demo cells would raise on the stubs
        body = c.split("\n", 1)[1] if "\n" in c else ""
        tree = ast.parse(body)
        tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef,
                                                            ast.ClassDef, ast.Assign))]
        try:
            exec(compile(tree, name, "exec"), namespace)  # noqa: S102 - the course's own lab source
        except Exception:  # noqa: BLE001 - an assignment that calls a stub: its name stays undefined
            pass
    mod = _lab_module(name)
    out = io.StringIO()
    with pytest.raises(ChecksFailed):
        run_checks(mod, namespace, out=out)
    lines = out.getvalue().splitlines()
    n = len(collect(mod))
    assert lines[0] == f"0 of {n} checks passed" and len(lines) == n + 1
    assert all(ln.startswith("  FAILED ") for ln in lines[1:]) and "Traceback" not in out.getvalue()


# ------------------------------------------------------------------ scaleout validate


@pytest.mark.slow
def test_validate_passes_the_reference_fails_the_blank_release_and_names_a_bad_path(tmp_path, capsys):
    lab = find_lab("lab21", ROOT)
    assert main(["validate", "lab21", str(lab.source)]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 checks passed" in out and "ready to hand in" in out and "FAILED" not in out

    release = assign(lab, tmp_path / "release") / f"{lab.name}.ipynb"
    assert main(["validate", "lab21", str(release)]) == 1
    out = capsys.readouterr().out
    assert "0 of 4 checks passed" in out and out.count("  FAILED ") == 4 and "not ready" in out
    assert "NotImplementedError" in out and "Traceback" not in out

    assert main(["validate", "lab21", str(tmp_path / "missing.ipynb")]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [f"scaleout: error: {tmp_path / 'missing.ipynb'} does not exist; "
                                                 f"give the path of your lab notebook (.ipynb)"]
    assert captured.out == ""
