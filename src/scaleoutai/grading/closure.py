"""Which modules of the course a lab must switch off: the forbidden ones and every module that reaches them.

A lab names the modules that hold its answer (``UNIMPORTABLE``). Stubbing only those is not enough: a
module of another part that imports them (``scaleoutai.cases.clinical_fl`` imports ``scaleoutai.ml``)
becomes importable once a student plants a fake ``scaleoutai.ml`` in ``sys.modules``, and then runs
its own copy of the answer. So the sandbox stubs the closure: every course module from which a
forbidden module is reachable in the import graph, read from the source with ``ast`` (imports inside
functions count, and so does every parent package, which ``import a.b.c`` executes first). Nothing is
imported to build the graph.
"""
from __future__ import annotations

import ast
import functools
import os
from collections import deque


def course_modules(package_dir: str) -> dict[str, str]:
    """{module name: file} for every ``.py`` below ``package_dir`` (a package's name maps to its __init__)."""
    top = os.path.basename(package_dir.rstrip(os.sep))
    base = os.path.dirname(package_dir.rstrip(os.sep))
    found = {}
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        if "__init__.py" not in files:
            dirs[:] = []
            continue
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), base)[:-3].split(os.sep)
                name = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
                found[name] = os.path.join(folder, f)
    assert top in found, f"{package_dir} is not a package"
    return found


def _imports(name: str, path: str, modules: dict[str, str]) -> set[str]:
    """The modules ``name`` may import: absolute names, relative ones resolved, ``from m import sub``."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return set()
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if called in ("import_module", "__import__"):  # importlib.import_module("scaleoutai.ml")
                out.add(node.args[0].value)
    parents = name.split(".")
    out.update(".".join(parents[:i]) for i in range(1, len(parents)))
    return {m for m in out if m and m != name}


def import_graph(modules: dict[str, str]) -> dict[str, set[str]]:
    """{module: the names it imports}; targets may lie outside the course (numpy, ray.util.collective)."""
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _matches(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == f or name.startswith(f + ".") for f in forbidden)


def reaching(graph: dict[str, set[str]], forbidden: tuple[str, ...]) -> set[str]:
    """Every module of ``graph`` that is forbidden or from which a forbidden module is reachable."""
    users: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        for t in targets:
            users.setdefault(t, set()).add(mod)
    bad = {m for m in graph if _matches(m, forbidden)}
    bad |= {u for t, us in users.items() if _matches(t, forbidden) for u in us}
    todo = deque(bad)
    while todo:
        for u in users.get(todo.popleft(), ()):
            if u not in bad:
                bad.add(u)
                todo.append(u)
    return bad


def closure_files(forbidden: tuple[str, ...], package_dir: str) -> list[list[str]]:
    """[module, file] pairs to stub for a lab: the forbidden course modules as they are (a package's folder
    whole) and every other module that reaches one (a package by its ``__init__.py``), sorted."""
    modules, graph = _course(package_dir)
    bad = reaching(graph, forbidden)
    out = []
    for name in sorted(bad):
        path = modules[name]
        if _matches(name, forbidden) and any(_matches(p, forbidden) for p in _parents(name)):
            continue  # inside a forbidden package whose whole folder is stubbed
        if _matches(name, forbidden) and path.endswith("__init__.py"):
            path = os.path.dirname(path)
        out.append([name, path])
    return out


@functools.lru_cache(maxsize=4)
def _course(package_dir: str) -> tuple[dict[str, str], dict[str, set[str]]]:
    """The course's modules and import graph, read once per process (a batch grades one installed copy)."""
    modules = course_modules(package_dir)
    return modules, import_graph(modules)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]
