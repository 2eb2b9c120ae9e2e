"""A local Ray for the tests that need one, started with one retry.

Ray waits a fixed 30 s for its raylet to register (ray/_private/node.py); on 2 busy cores that start-up
can miss the wait once while the cluster itself is fine. A second start after a clean shutdown is what a
person would do; a second failure is raised as it is."""
from __future__ import annotations

from typing import Any


def start_local_ray(ray: Any, num_cpus: int = 2) -> None:
    # "local": a private Ray even while another test's cluster_utils.Cluster has written
    # /tmp/ray/ray_current_cluster, which a bare ray.init() would join (or refuse, given num_cpus)
    options = dict(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.init(**options)
    except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this time-out
        if "timed out during startup" not in str(exc):
            raise
        ray.shutdown()
        ray.init(**options)
