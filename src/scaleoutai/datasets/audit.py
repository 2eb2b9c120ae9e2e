"""Does every chapter load its data only through ``scaleoutai.datasets``, as the catalogue says? (Appendix D)

Static, over the chapter's syntax tree (nothing is run): every import binds a name to a dotted path,
every ``name.attr.attr`` chain is resolved through those bindings, and the resolved paths are checked.

    check_chapter(path)     (a) no data-loading API outside scaleoutai.datasets (sklearn.datasets, Hugging
                            Face datasets, torchvision.datasets, urllib, requests, fetch_*/load_dataset, a
                            reader given a URL); (b) every loader it calls is catalogued for this chapter;
                            (c) no generator called through the part it used to live in (``MOVED``)
    check_catalogue(paths)  check_chapter on each, then the other direction: every chapter a catalogue
                            entry, an instance or a shipped asset lists really uses it

Every problem is one line ``file:line: what; what to do``.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from .catalogue import CATALOGUE, HELPERS, INSTANCES, MOVED, SHIPPED
from .entries import Chapter

_PACKAGE = Path(__file__).resolve().parents[1]  # src/scaleoutai
_TOOLING = {"scaleoutai.datasets.catalogue", "scaleoutai.datasets.entries", "scaleoutai.datasets.audit"}
FORBIDDEN = ("sklearn.datasets", "torchvision.datasets", "torchtext", "datasets", "tensorflow_datasets",
             "keras.datasets", "tensorflow.keras.datasets", "urllib", "requests", "http.client", "httpx",
             "pooch", "wget", "huggingface_hub", "openml", "kaggle")
_FETCH = re.compile(r"^(fetch_\w+|load_dataset|load_svmlight_files?|load_files|urlopen|urlretrieve)$")
_READER = re.compile(r"^(read_\w+|load|loadtxt|genfromtxt|fromfile|open)$")
_URL = re.compile(r"^(https?|ftp|s3|gs|hf)://", re.I)
_FOLDER = re.compile(r"^(?:(\d\d)|appendix-([a-d]))-")


def chapter_id(path: Path) -> Chapter | None:
    """13 for chapters/13-distributed-graph-ml/..., "A" for chapters/appendix-a-...; None otherwise."""
    m = _FOLDER.match(Path(path).parent.name)
    return None if m is None else (int(m[1]) if m[1] else m[2].upper())


@functools.lru_cache(maxsize=None)
def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] != "scaleoutai":
        return False
    base = _PACKAGE.joinpath(*parts[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def split(dotted: str) -> tuple[str, str]:
    """("scaleoutai.datasets", "blobs") for "scaleoutai.datasets.blobs": the longest module prefix of ours,
    then the next name; paths outside scaleoutai split at their last dot."""
    parts = dotted.split(".")
    for k in range(len(parts) - 1, 0, -1):
        if _is_module(".".join(parts[:k])):
            return ".".join(parts[:k]), parts[k]
    return ".".join(parts[:-1]), parts[-1]


def references(tree: ast.AST) -> tuple[dict[str, int], dict[str, int]]:
    """({imported dotted module or name: line}, {resolved dotted path of every name chain: first line})."""
    binds: dict[str, str] = {}
    imports: dict[str, int] = {}
    nodes = list(ast.walk(tree))  # walk once: the walk, not the checks, is what costs
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                imports.setdefault(a.name, node.lineno)
                binds[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                imports.setdefault(f"{node.module}.{a.name}", node.lineno)
                binds[a.asname or a.name] = f"{node.module}.{a.name}"
    used: dict[str, int] = {}
    for node in nodes:
        chain, cur = [], node
        while isinstance(cur, ast.Attribute):
            chain.append(cur.attr)
            cur = cur.value
        if isinstance(cur, ast.Name) and cur.id in binds and isinstance(node, (ast.Attribute, ast.Name)):
            dotted = ".".join([binds[cur.id], *reversed(chain)])
            used.setdefault(dotted, node.lineno)
    return imports, used


def _calls_with_url(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        args = [*node.args, *(k.value for k in node.keywords)]
        texts = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        texts += [a.values[0].value for a in args if isinstance(a, ast.JoinedStr) and a.values
                  and isinstance(a.values[0], ast.Constant)]
        if _READER.match(name) and any(_URL.match(t) for t in texts):
            out.append((node.lineno, name))
    return out


_LOADERS = {d.loader: d for d in CATALOGUE}


def _datasets_name(dotted: str) -> str | None:
    """The public name of scaleoutai.datasets a path reaches (datasets.tabular.blobs -> blobs), else None."""
    if not dotted.startswith("scaleoutai.datasets."):
        return None
    module, name = split(dotted)
    if (module in _TOOLING or not module.startswith("scaleoutai.datasets") or name.startswith("_")
            or _is_module(f"{module}.{name}")):
        return None  # tooling, a submodule itself, or a dunder such as __all__
    return name


@functools.lru_cache(maxsize=256)
def _parsed(path: str, mtime_ns: int) -> ast.AST:
    return ast.parse(Path(path).read_text(encoding="utf-8"), path)


def _tree(path: Path) -> ast.AST:
    """The syntax tree of a source, parsed once per version of the file (check_catalogue reads each twice)."""
    return _parsed(str(path), Path(path).stat().st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _references_of(tree: ast.AST) -> tuple[dict[str, int], dict[str, int]]:
    return references(tree)


def uses_of(path: Path) -> tuple[set[str], set[str]]:
    """(datasets names the source reaches, every resolved dotted path it uses)."""
    _, used = _references_of(_tree(path))
    names = {n for d in used if (n := _datasets_name(d))}
    return names, set(used)


def check_chapter(path: Path) -> list[str]:
    """Problems (a), (b) and (c) of one chapter source; empty when it loads data only as catalogued."""
    path = Path(path)
    where = lambda line: f"{path.name}:{line}"  # noqa: E731
    try:
        tree = _tree(path)
    except SyntaxError as e:
        return [f"{where(e.lineno)}: not valid Python ({e.msg}); fix it first"]
    me = chapter_id(path)
    imports, used = _references_of(tree)
    problems, flagged = [], set()
    for dotted, line in sorted([*imports.items(), *used.items()], key=lambda x: x[1]):
        bad = next((f for f in FORBIDDEN if dotted == f or dotted.startswith(f + ".")), None)
        if bad and bad not in flagged:  # once per API: the import, or the first use through a parent package
            flagged.add(bad)
            problems.append(f"{where(line)}: uses {dotted}: chapters load data only through scaleoutai.datasets "
                            f"(generate it from a seed there, or ship it in a pinned package)")
    for dotted, line in sorted(used.items(), key=lambda x: x[1]):
        module, name = split(dotted)
        if not dotted.startswith("scaleoutai.") and _FETCH.match(name):
            problems.append(f"{where(line)}: calls {dotted}, which downloads data; use a loader of scaleoutai.datasets")
        if (module, name) in MOVED:
            problems.append(f"{where(line)}: {module}.{name} moved to scaleoutai.datasets: call "
                            f"datasets.{MOVED[module, name]}")
            continue
        ds = _datasets_name(dotted)
        if ds is None or ds in HELPERS:
            continue
        if ds not in _LOADERS:
            problems.append(f"{where(line)}: datasets.{ds} is not in the catalogue: add a Dataset entry for it "
                            f"to scaleoutai/datasets/catalogue.py (a type or a constant: add it to HELPERS)")
        elif not any(u.chapter == me and not u.via for u in _LOADERS[ds].uses):
            problems.append(f"{where(line)}: calls datasets.{ds}, but its catalogue entry does not list chapter "
                            f"{me}: add a Use with this chapter's smoke and full sizes")
    for line, name in _calls_with_url(tree):
        problems.append(f"{where(line)}: {name}(...) of a URL downloads data at run time; generate it with "
                        f"scaleoutai.datasets or ship it in a package")
    return problems


def check_catalogue(paths: list[Path]) -> list[str]:
    """check_chapter on every source, then each catalogued use, instance and shipped asset against the
    chapters: a listed chapter must exist among ``paths`` and use it (directly, or through ``via``)."""
    paths = [Path(p) for p in paths]
    problems = [p for path in paths for p in check_chapter(path)]
    by_id = {chapter_id(p): p for p in paths if chapter_id(p) is not None}
    scanned = {}
    for cid, p in by_id.items():
        try:
            scanned[cid] = uses_of(p)
        except SyntaxError:  # check_chapter has reported it; the chapter uses nothing until it parses
            scanned[cid] = (set(), set())

    def reaching(dotted: str) -> set[Chapter]:
        return {cid for cid, (_, used) in scanned.items() if any(u == dotted or u.startswith(dotted + ".")
                                                                   for u in used)}
    for d in CATALOGUE:
        for u in d.uses:
            if u.chapter not in scanned:
                problems.append(f"catalogue: {d.loader} lists chapter {u.chapter}, which has no source here")
            elif u.via and u.chapter not in reaching(u.via):
                problems.append(f"catalogue: {d.loader} lists chapter {u.chapter} via {u.via}, which that chapter "
                                f"never calls: drop the Use or fix the via")
            elif not u.via and d.loader not in scanned[u.chapter][0]:
                problems.append(f"catalogue: {d.loader} lists chapter {u.chapter}, which never calls it: "
                                f"drop that Use")
        for via in {u.via for u in d.uses if u.via}:
            listed = {u.chapter for u in d.uses if u.via == via}
            for cid in sorted(reaching(via) - listed, key=str):
                problems.append(f"catalogue: chapter {cid} calls {via}, which draws {d.loader}: add a Use for it")
    for inst in INSTANCES:
        found = reaching(inst.constructor)
        if found != set(inst.chapters):
            problems.append(f"catalogue: instance {inst.constructor} lists chapters {sorted(map(str, inst.chapters))}"
                            f" but is used by {sorted(map(str, found))}")
    for s in SHIPPED:
        missing = set(s.chapters) - reaching(s.module)
        if missing:
            problems.append(f"catalogue: shipped {s.name} ({s.module}) lists chapters "
                            f"{sorted(map(str, missing))} that never import it")
    return problems


def benchmark_scripts(root: Path) -> dict[str, Path]:
    """{script name: path} of every benchmarks/bench_*.py, to hold BENCHMARKS to the folder."""
    return {p.name: p for p in sorted((Path(root) / "benchmarks").glob("bench_*.py"))}


__all__ = ["FORBIDDEN", "chapter_id", "split", "references", "uses_of", "check_chapter", "check_catalogue",
           "benchmark_scripts"]
