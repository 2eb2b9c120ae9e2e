"""The torch install picks the CPU build on a GPU-less Linux and PyPI's build elsewhere."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "environments" / "install_torch.py"
spec = importlib.util.spec_from_file_location("install_torch", PATH)
install_torch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install_torch)


@pytest.mark.parametrize("system,nvidia,cpu_index", [("Linux", False, True), ("Linux", True, False),
                                                     ("Darwin", False, False), ("Windows", False, False)])
def test_the_cpu_index_is_used_only_on_linux_without_an_nvidia_gpu(system, nvidia, cpu_index):
    args = install_torch.choose(system, nvidia)
    assert args[0] == "torch==2.13.0" and (install_torch.CPU_INDEX in args) == cpu_index


def test_an_installed_torch_of_the_pinned_version_is_kept(capsys):
    assert install_torch.installed().startswith("2.13.0")
    assert install_torch.main() == 0 and "already installed" in capsys.readouterr().out
