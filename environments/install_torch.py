"""Install torch==2.13.0 into this interpreter, the build that fits the machine (Makefile, README).

Order: a wheel the configured pip already has locally (find-links, as CI's machines do) without
touching any index; otherwise PyTorch's CPU index on Linux without an NVIDIA GPU (the default PyPI
build of torch for Linux is the CUDA one, with gigabytes of nvidia-* packages); otherwise PyPI (macOS,
Windows, or a Linux GPU machine, where the CUDA build is wanted).
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time

VERSION = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def has_nvidia_gpu() -> bool:
    return os.path.exists("/proc/driver/nvidia") or shutil.which("nvidia-smi") is not None


def choose(system: str, nvidia: bool) -> list[str]:
    """pip arguments for the index step: the CPU index on a GPU-less Linux, PyPI elsewhere."""
    if system == "Linux" and not nvidia:
        return [f"torch=={VERSION}", "--index-url", CPU_INDEX]
    return [f"torch=={VERSION}"]


def _pip(*args: str) -> bool:
    return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args]).returncode == 0


def local_wheel() -> bool:
    """Whether pip's own configuration (find-links) holds a torch wheel, found without any index."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-index", "--dest", tmp,
               f"torch=={VERSION}"]
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def installed() -> str | None:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001 - not installed
        return None


def main() -> int:
    t0 = time.perf_counter()
    have = installed()
    if have and have.split("+")[0] == VERSION:
        print(f"torch {have} is already installed")
        return 0
    if local_wheel():
        how = "a local wheel (pip's find-links; its dependencies from PyPI)"
        if not _pip(f"torch=={VERSION}"):
            return 1
    else:
        args = choose(platform.system(), has_nvidia_gpu())
        how = "PyTorch's CPU index" if CPU_INDEX in args else "PyPI"
        if not _pip(*args):
            print(f"could not install torch=={VERSION} from {how}; see pip's message above", file=sys.stderr)
            return 1
    print(f"torch {installed()} installed from {how} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
