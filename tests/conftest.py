"""Fixtures shared by several test modules."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

# `make test` runs on two pytest-xdist workers (`--dist loadgroup`). Tests and chapters that start a whole
# local Ray, Spark or Slurm run on one worker, one after the other: two of them starting at once on 2 cores
# can overrun Ray's fixed 30 s start-up wait. Chapters are put in a group by what their source uses.
_GROUPS = {"slurm": "slurm", "slurm_env": "slurm", "ray_cluster": "ray", "ray_local": "ray", "spark": "spark",
           "spark_run": "spark"}
_USES = [("ray", re.compile(r"(?<![A-Za-z_])ray\b|loadgen|launchers")), ("spark", re.compile(r"spark", re.I))]
_RAY_MODULES = ("test_launchers_ray.py", "test_agents_dai.py", "test_ml_federated.py", "test_infra_scheduling.py")


def _group(item) -> str | None:
    group = next((g for f, g in _GROUPS.items() if f in getattr(item, "fixturenames", ())), None)
    source = getattr(getattr(item, "callspec", None), "params", {}).get("source")
    if group is None and item.path.name == "test_notebooks.py" and isinstance(source, Path) and source.is_file():
        text = source.read_text(encoding="utf-8", errors="replace")
        group = next((g for g, pattern in _USES if pattern.search(text)), None)
    if group is None and item.path.name in _RAY_MODULES and "ray" in re.split(r"[_\[\]-]", item.name.lower()):
        group = "ray"
    return group


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def smollm2():
    """The real model, read once per worker: {"path", "file" (GGUFModel), "w" (LlamaWeights), "tok"}; skips with
    the one-line `make install` message when the model file is absent."""
    from scaleoutai.errors import UserError
    from scaleoutai.serving import llama, model_files

    try:
        path = model_files.model_path()
    except UserError as e:
        pytest.skip(str(e))
    m = model_files.read_gguf(path)
    return {"path": path, "file": m, "w": llama.llama_weights(m), "tok": model_files.load_tokenizer(path)}


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray on the 2 cores, one per test module that asks for it, shut down when the module ends."""
    ray = pytest.importorskip("ray")
    from ray_start import start_local_ray

    start_local_ray(ray)
    try:
        yield ray
    finally:
        ray.shutdown()


# Where CI's time goes, printed at the end of every run (the full durations list would be thousands of
# lines): seconds per test file and per xdist worker, so the 45-minute budget can be kept.
_SPENT: dict[str, dict[str, float]] = {"file": {}, "worker": {}}


def pytest_runtest_logreport(report):
    if report.when not in ("setup", "call", "teardown"):
        return
    d = float(getattr(report, "duration", 0.0) or 0.0)
    file = report.nodeid.split("::")[0].rsplit("/", 1)[-1]
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
    for kind, key in (("file", file), ("worker", worker)):
        _SPENT[kind][key] = _SPENT[kind].get(key, 0.0) + d


def pytest_terminal_summary(terminalreporter):
    if not _SPENT["file"]:
        return
    tr = terminalreporter
    tr.section("time spent (s)")
    files = sorted(_SPENT["file"].items(), key=lambda kv: -kv[1])
    tr.write_line("  ".join(f"{name}:{sec:.0f}" for name, sec in files[:40]))
    tr.write_line(f"all files: {sum(_SPENT['file'].values()):.0f}; workers: "
                  + ", ".join(f"{w} {s:.0f}" for w, s in sorted(_SPENT["worker"].items())))
