"""Gradescope's image installs the course's pinned versions of what the grading engine imports (issue 35)."""
from __future__ import annotations

import re
from pathlib import Path

from scaleoutai.grading.gradescope import ENGINE_PACKAGES, pins, setup_script

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "environments" / "constraints.txt"


def _pinned(name: str) -> str:
    return re.search(rf"^{re.escape(name)}==(\S+)", CONSTRAINTS.read_text(), re.M | re.I).group(1)


def test_setup_script_pins_every_engine_package_to_the_constraints_file():
    script = setup_script(CONSTRAINTS)
    for name in ENGINE_PACKAGES:
        assert f"{name}=={_pinned(name)}" in script, f"setup.sh installs {name} without the course's pin"
    assert "download.pytorch.org/whl/cpu torch==" in script
    assert not re.search(r"(?:numpy|torch|tqdm)(?=\s|$)", script.split("set -euo pipefail")[1]), "an unpinned install"


def test_without_a_constraints_file_the_installed_versions_are_pinned(tmp_path):
    from importlib.metadata import version

    got = pins(tmp_path / "missing.txt")
    assert got["numpy"] == f"numpy=={version('numpy')}"
    assert "+" not in got["torch"]  # the CPU index's torch, whatever local build is installed here
