"""Every function a student writes is described where the release shows it: each stubbed function or
method keeps a docstring (an ``__init__`` may lean on its class's), so a stub is never a bare name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scaleoutai.grading.labs import STUB, find_lab, list_labs, strip_solutions

ROOT = Path(__file__).resolve().parents[1]


def undescribed_stubs(source_text: str) -> list[str]:
    """Names of functions whose released body holds the stub but which carry no docstring."""
    text, _ = strip_solutions(source_text)
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())
    tree = ast.parse(code)
    missing = []
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] + [tree]:
        for node in getattr(cls, "body", []):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if STUB not in ast.get_source_segment(code, node) or ast.get_docstring(node):
                continue
            if node.name == "__init__" and isinstance(cls, ast.ClassDef) and ast.get_docstring(cls):
                continue
            missing.append(f"{cls.name}.{node.name}" if isinstance(cls, ast.ClassDef) else node.name)
    return missing


@pytest.mark.parametrize("name", list_labs(ROOT))
def test_every_stub_a_student_fills_in_has_a_docstring(name):
    missing = undescribed_stubs(find_lab(name, ROOT).source.read_text())
    assert not missing, f"{name}: describe {missing} under their def lines (the release shows only the stub)"


def test_a_bare_stub_is_reported():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert undescribed_stubs(src) == ["f"]
    assert undescribed_stubs(src.replace("(x):\n", '(x):\n    """Twice x."""\n')) == []
