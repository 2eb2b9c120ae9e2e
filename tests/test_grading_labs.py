"""Lab sources: solution markers, the student release, and reading submitted notebooks."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grading_helpers import notebook
from scaleoutai.cli import UserError
from scaleoutai.grading.labs import (STUB, assign, find_lab, list_labs, read_cells, solution_notebook,
                                     strip_solutions)

ROOT = Path(__file__).resolve().parents[1]
LABS = ["lab01-sharded-gradient", "lab02-vector-clocks", "lab04-ring-allreduce", "lab06-shuffle-by-key",
        "lab08-sharded-sampler", "lab10-error-feedback-compression", "lab11-embedding-paramserver", "lab14-fedavg-dropout",
        "lab24-paged-kv-cache", "lab25-sharded-topk-merge", "lab35-robust-aggregation"]


def test_the_labs_are_found_by_number_or_full_name():
    assert set(LABS) <= set(list_labs(ROOT))
    assert list_labs(ROOT) == sorted(list_labs(ROOT))
    assert find_lab("lab04", ROOT).name == find_lab("4", ROOT).name == find_lab("lab04-ring-allreduce", ROOT).name
    with pytest.raises(UserError, match="choose one of"):
        find_lab("lab99", ROOT)


def test_strip_solutions_replaces_each_block_with_a_stub_at_its_indent():
    text = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    out, removed = strip_solutions(text)
    assert out == f"def f(x):\n    {STUB}\n" and removed == ["    return x + 1"]


@pytest.mark.parametrize("text,msg", [("### BEGIN SOLUTION\nx = 1\n", "never closed"),
                                      ("x = 1\n### END SOLUTION\n", "without a"),
                                      ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n", "inside another")])
def test_broken_markers_are_named(text, msg):
    with pytest.raises(UserError, match=msg):
        strip_solutions(text)


@pytest.mark.parametrize("name", LABS)
def test_release_has_stubs_public_tests_and_no_solution_or_grading_text(tmp_path, name):
    lab = find_lab(name, ROOT)
    dest = assign(lab, tmp_path)
    nb = json.loads((dest / f"{name}.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "NotImplementedError" in code and "BEGIN SOLUTION" not in code
    _, removed = strip_solutions(lab.source.read_text())
    assert not [ln for ln in removed if len(ln.strip()) > 15 and ln.strip() in code]
    assert sorted(p.name for p in dest.iterdir()) == sorted([f"{name}.ipynb", "public_tests.py"])
    tagged = [c["metadata"].get("tags", []) for c in nb["cells"] if c["cell_type"] == "code"]
    assert ["parameters"] in tagged and ["public-tests"] in tagged


def _copy_lab(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "labs" / LABS[2], tmp_path / "labs" / LABS[2])
    shutil.copytree(ROOT / "grading" / LABS[2], tmp_path / "grading" / LABS[2])
    return tmp_path


def test_release_refuses_solution_text_left_outside_a_block(tmp_path):
    root = _copy_lab(tmp_path)
    src = root / "labs" / LABS[2] / f"{LABS[2]}.py"
    src.write_text(src.read_text() + "\n# %%\ngive, (lo, hi) = ((lo, cut), (cut, hi)) if v & dist else ((cut, hi), (lo, cut))\n")
    with pytest.raises(UserError, match="refusing to write the release"):
        assign(find_lab("lab04", root), tmp_path / "out")
    assert not (tmp_path / "out" / LABS[2]).exists()


def test_release_refuses_hidden_test_text(tmp_path):
    root = _copy_lab(tmp_path)
    public = root / "labs" / LABS[2] / "public_tests.py"
    public.write_text(public.read_text() + "\nFORBIDDEN_MODULES = ('torch.distributed', 'scaleoutai.collectives')\n")
    (root / "grading" / LABS[2] / "tests.py").write_text(
        "FORBIDDEN_MODULES = ('torch.distributed', 'scaleoutai.collectives')\n")
    with pytest.raises(UserError, match="refusing"):
        assign(find_lab("lab04", root), tmp_path / "out")


def test_read_cells_skips_public_tests_and_demo_cells_and_comments_out_magics(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "%matplotlib inline\nx = 1", "run_public_tests()", "print(f(3))",
                    tags={1: ["public-tests"], 2: ["demo"]})
    cells = read_cells(path)
    assert cells[0] == {"source": "pass  # %matplotlib inline\nx = 1", "skip": False}
    assert cells[1]["skip"] and cells[2]["skip"]


@pytest.mark.parametrize("lab_name", list_labs(ROOT))
def test_every_lab_example_cell_is_tagged_demo_and_holds_nothing_the_graded_cells_need(lab_name, tmp_path):
    """The grader skips ``demo`` cells: no student code may sit in one, and no function they define may be
    called from a cell the grader runs (the mutant batches then check the reference still scores 100)."""
    import ast

    nb = json.loads(solution_notebook(find_lab(lab_name, ROOT), tmp_path / "s.ipynb").read_text())
    code = [("demo" in c["metadata"].get("tags", []), "".join(c["source"])) for c in nb["cells"]
            if c["cell_type"] == "code" and "public-tests" not in c["metadata"].get("tags", [])]
    demos = [src for is_demo, src in code if is_demo]
    assert demos, f"{lab_name}: tag its example cell demo"
    import jupytext

    source = jupytext.read(find_lab(lab_name, ROOT).source)
    assert not [c for c in source.cells if "demo" in c.metadata.get("tags", []) and "BEGIN SOLUTION" in c.source]
    defined = {n.name for src in demos for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)}
    used = {n.id for is_demo, src in code if not is_demo for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    assert not defined & used, f"{lab_name}: graded cells use {sorted(defined & used)}, defined in a demo cell"


@pytest.mark.parametrize("text", ["{ not json", "[1, 2]", '{"cells": 3}'])
def test_read_cells_rejects_what_is_not_a_notebook_with_a_reason(tmp_path, text):
    (tmp_path / "bad.ipynb").write_text(text)
    with pytest.raises(ValueError, match="notebook"):
        read_cells(tmp_path / "bad.ipynb")


def test_solution_notebook_has_no_markers(tmp_path):
    path = solution_notebook(find_lab("lab01", ROOT), tmp_path / "s.ipynb")
    assert "BEGIN SOLUTION" not in path.read_text() and "def local_gradient" in path.read_text()
