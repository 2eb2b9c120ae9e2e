"""Fixtures shared by several test modules."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray on the 2 cores, one per test module that asks for it, shut down when the module ends."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()
