"""Gradescope export: an autograder zip whose ``run_autograder`` calls this same engine.

The zip holds ``setup.sh`` (installs numpy, torch CPU and the few libraries the engine imports, at the
course's pinned versions: ``environments/constraints.txt``, else the versions installed here),
``run_autograder``, ``src/`` (the scaleoutai package), ``grading/<lab>`` and the lab's public
tests (not its solution). ``python -m scaleoutai.grading.gradescope LAB SUBMISSION_DIR RESULTS_JSON``
grades one submission and always leaves a results.json, even when the engine itself fails.
"""
from __future__ import annotations

import os
import sys
import tempfile
import traceback
import zipfile
from pathlib import Path

from .labs import Lab

SETUP = """#!/usr/bin/env bash
# Gradescope image build: Python 3.11+, CPU torch and the engine's few dependencies.
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv util-linux >/dev/null
python3 -m pip install --quiet --break-system-packages --index-url https://download.pytorch.org/whl/cpu {torch} \\
  || python3 -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu {torch}
python3 -m pip install --quiet --break-system-packages {rest} \\
  || python3 -m pip install --quiet {rest}
# Hidden tests readable by root only, in case the container forbids mount namespaces.
chmod -R go-rwx /autograder/source/grading
"""

RUN = """#!/usr/bin/env bash
# Gradescope calls this for each submission; the engine writes results/results.json in every case.
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
export SCALEOUT_ROOT="$ROOT/source"
export PYTHONPATH="$ROOT/source/src${{PYTHONPATH:+:$PYTHONPATH}}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
exec "${{SCALEOUT_PYTHON:-python3}}" -m scaleoutai.grading.gradescope {lab} "$ROOT/submission" "$ROOT/results/results.json"
"""


ENGINE_PACKAGES = ("torch", "numpy", "cloudpickle", "PyYAML", "tqdm")  # what the engine imports


def pins(constraints: Path | None) -> dict[str, str]:
    """``name==version`` of each engine package: from the constraints file when it pins it, else the version
    installed here (its local label such as ``+cpu`` dropped: setup.sh takes torch from the CPU index)."""
    from importlib.metadata import version

    pinned: dict[str, str] = {}
    if constraints is not None and constraints.is_file():
        for line in constraints.read_text().splitlines():
            name, sep, ver = line.split("#")[0].strip().partition("==")
            if sep:
                pinned[name.strip().lower()] = ver.strip()
    return {name: f"{name}=={pinned.get(name.lower()) or version(name).split('+')[0]}" for name in ENGINE_PACKAGES}


def setup_script(constraints: Path | None) -> str:
    """setup.sh with the engine packages pinned (a Gradescope image grades as the course was tested)."""
    p = pins(constraints)
    return SETUP.format(torch=p["torch"], rest=" ".join(p[n] for n in ENGINE_PACKAGES if n != "torch"))


def export(lab: Lab, zip_path: Path) -> Path:
    """Write the autograder zip for ``lab`` atomically."""
    import scaleoutai

    pkg = Path(scaleoutai.__file__).parent
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".autograder-", suffix=".zip", dir=zip_path.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            _add(z, "setup.sh", setup_script(lab.grading.parents[1] / "environments" / "constraints.txt"))
            _add(z, "run_autograder", RUN.format(lab=lab.name))
            for f in sorted(pkg.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts:
                    z.write(f, f"src/scaleoutai/{f.relative_to(pkg)}")
            for f in sorted(lab.grading.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts:
                    z.write(f, f"grading/{lab.name}/{f.relative_to(lab.grading)}")
            if lab.public_tests.is_file():
                z.write(lab.public_tests, f"labs/{lab.name}/public_tests.py")
            else:
                _add(z, f"labs/{lab.name}/.keep", "")
        os.replace(tmp, zip_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return zip_path


def _add(z: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o755 << 16
    z.writestr(info, text)


def run_one(lab_name: str, submission: Path, results: Path) -> int:
    """Grade the single submission Gradescope unpacked; results.json is written whatever happens."""
    from . import results as R
    from .labs import find_lab
    from .runner import grade_batch
    from .jail import Limits

    try:
        import yaml

        lab = find_lab(lab_name)
        timeout = float(yaml.safe_load((lab.grading / "rubric.yaml").read_text()).get("timeout", 60))
        with tempfile.TemporaryDirectory(prefix="scaleout-gs-") as out:
            summary = grade_batch(lab, [submission], Path(out), jobs=1, quiet=True, limits=Limits(timeout=timeout))
            files = [Path(out) / i / "results.json" for i in summary.ids]
            if len(files) != 1 or not files[0].is_file():
                raise RuntimeError(f"expected one notebook in the submission, found {len(summary.ids)}")
            R.atomic_write(results, files[0].read_text())
        return 0
    except Exception as exc:  # noqa: BLE001 - Gradescope must always get a results.json
        traceback.print_exc()
        R.write_results(results, R.make_results(
            [R.test_entry("Notebook runs in the grader", 0, 0, f"the autograder failed: {exc}", status="failed")],
            f"The autograder could not grade this submission ({type(exc).__name__}: {exc}). "
            f"Submit exactly one .ipynb notebook; if this persists, tell your instructor.", 0.0, {"status": "error"}))
        return 0


if __name__ == "__main__":
    sys.exit(run_one(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))
