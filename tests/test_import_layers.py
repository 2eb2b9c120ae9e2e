"""The layout of DESIGN.md holds: shared layers below the parts, parts independent of each other,
tooling on top, and nothing but the entry point imports ``scaleoutai.cli``. Every import counts,
including the ones inside functions (they keep ``import scaleoutai`` light but are still dependencies).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scaleoutai"

# Lower numbers sit lower: a module may import its own unit and units of a lower layer only.
LAYERS = {
    "errors": 0,
    "cluster": 1,
    "collectives": 2,
    "nn": 2, "datasets": 2,
    "perf": 3,
    "foundations": 4, "data": 4, "ml": 4, "parallel": 4, "serving": 4, "agents": 4, "infra": 4, "cases": 4,
    "notebooks": 5, "grading": 5, "capstone": 5,
    "cli": 6,
}
PARTS = {unit for unit, layer in LAYERS.items() if layer == 4}
TOOLING = {unit for unit, layer in LAYERS.items() if layer == 5}


def _unit(module: str) -> str:
    """scaleoutai.parallel.zero -> parallel; scaleoutai -> '' (the package root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> tuple[str, str]:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    name = ".".join(parts)
    return name, name if is_pkg else name.rsplit(".", 1)[0]


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import of ours in a file; ``from . import x`` yields pkg.x."""
    _, package = _module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("scaleoutai"):
                continue
            if target == "scaleoutai":  # from scaleoutai import cluster, nn: each name is a unit
                found += [(node.lineno, f"scaleoutai.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("scaleoutai")]
    return found


def layer_violations() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        module, _ = _module_name(path)
        unit = _unit(module)
        if unit not in LAYERS:
            if unit:
                bad.append(f"{module}: the unit {unit!r} has no layer; add it to LAYERS in this test and to DESIGN.md")
            continue
        for line, target in imports_of(path):
            other = _unit(target)
            where = f"{path.relative_to(SRC.parent)}:{line} imports {target}"
            if other in ("", "__version__") or other == unit:
                continue
            if other == "cli":
                bad.append(f"{where}: nothing imports the entry point; raise scaleoutai.errors.UserError instead")
            elif other not in LAYERS:
                bad.append(f"{where}: {other!r} is not a known unit")
            elif unit in PARTS and other in PARTS:
                bad.append(f"{where}: parts never import each other; move what both need to a shared layer")
            elif LAYERS[other] > LAYERS[unit] and not (unit in TOOLING and other in TOOLING):
                bad.append(f"{where}: {unit} (layer {LAYERS[unit]}) imports upward into {other} "
                           f"(layer {LAYERS[other]})")
    return bad


def test_no_part_imports_another_part_and_nothing_imports_upward():
    assert layer_violations() == []


def test_errors_imports_nothing_of_ours():
    assert imports_of(SRC / "errors.py") == []


def test_every_unit_of_the_package_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())) and p.name != "__init__.py"}
    assert units - set(LAYERS) == set()


@pytest.mark.parametrize("source, expected", [
    ("from ..foundations import sharding\n", "parts never import each other"),
    ("from ..cli import main\n", "nothing imports the entry point"),
    ("from ..grading import runner\n", "imports upward"),
])
def test_the_layer_check_catches_each_kind_of_violation(tmp_path, monkeypatch, source, expected):
    fake = tmp_path / "scaleoutai"
    (fake / "parallel").mkdir(parents=True)
    (fake / "parallel" / "__init__.py").write_text("")
    (fake / "parallel" / "bad.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    found = layer_violations()
    assert len(found) == 1 and expected in found[0] and "parallel/bad.py:1" in found[0]


def test_import_scaleoutai_and_the_shared_layers_stays_light():
    code = ("import sys, scaleoutai, scaleoutai.errors, scaleoutai.cluster, scaleoutai.collectives, scaleoutai.nn, "
            "scaleoutai.perf, scaleoutai.foundations.sharding, scaleoutai.parallel.mesh, scaleoutai.notebooks\n"
            "print(sorted(m for m in ('torch', 'ray', 'pyspark', 'mlflow', 'matplotlib', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
