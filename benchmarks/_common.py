"""Shared bits of the benchmark scripts: the machine description and a results line."""
from __future__ import annotations

import os
import platform


def machine() -> str:
    """One line naming the machine a figure was measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
            mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}"


def report(name: str, value: float, unit: str, target: str, ok: bool) -> None:
    print(f"{name}: {value:.3g} {unit} (target {target}) {'MET' if ok else 'MISSED'}")
