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
