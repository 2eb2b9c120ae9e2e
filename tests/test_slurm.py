"""scale "slurm": the rendered sbatch script, end to end on a real private Slurm (Appendix B).

The fixture starts munged, slurmctld and slurmd (Debian slurm-wlm) with a private key and socket,
free ports and all state in a temp folder. Needs root; CI installs the packages
(environments/slurm/install-ci.sh), and so does the fixture when it is root and they are missing.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from scaleoutai.cluster.launchers import run_script
from scaleoutai.cluster.launchers.slurm import render_sbatch
from scaleoutai.cluster.launchers.slurm_local import LocalSlurm, unavailable_reason

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "allreduce_check.py")


@pytest.fixture(scope="session")
def slurm():
    why = unavailable_reason()
    if why and os.geteuid() == 0 and "missing" in why:
        subprocess.run(["bash", str(ROOT / "environments/slurm/install-ci.sh")], timeout=900, check=False)
        why = unavailable_reason()
    if why:
        pytest.skip(why)
    with LocalSlurm(timeout=90) as cluster:
        yield cluster


@pytest.fixture
def slurm_env(slurm, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm


def test_rendered_script_starts_one_torchrun_per_node_with_c10d_on_the_first_node():
    text = render_sbatch("x.py", nodes=4, nproc_per_node=8, gpus_per_node=8, script_args=["--a b"],
                         env={"MLFLOW_TRACKING_URI": "sqlite:///m.db"}, max_restarts=3, partition="gpu")
    assert '#SBATCH --nodes=4' in text and "#SBATCH --ntasks-per-node=1" in text
    assert "#SBATCH --gpus-per-node=8" in text and "#SBATCH --partition=gpu" in text
    assert 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)' in text
    assert '--rdzv-backend=c10d --rdzv-endpoint="$head_node:$rdzv_port"' in text
    assert "--nproc-per-node=8" in text and "--max-restarts=3" in text
    assert "export MLFLOW_TRACKING_URI=sqlite:///m.db" in text
    assert text.rstrip().endswith(f"{os.path.abspath('x.py')} '--a b'")
    assert "@{" not in text  # every placeholder filled
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)  # bash can parse it


def test_dry_run_prints_the_sbatch_script_without_slurm(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch anywhere: a dry run must not need it
    assert run_script(EXAMPLE, scale="slurm", nodes=2, workers=3, dry_run=True) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/bin/bash") and "--nproc-per-node=3" in out and "#SBATCH --nodes=2" in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sbatch_job_runs_end_to_end_on_a_real_slurm(slurm_env, tmp_path, capsys):
    rc = run_script(EXAMPLE, scale="slurm", workers=2, script_args=["--length", "29"], timeout=240,
                    job_dir=str(tmp_path), env={"SCALEOUT_PROBE": "1"})
    cap = capsys.readouterr()
    assert rc == 0, cap.out + cap.err
    job = re.search(r"submitted slurm job (\d+)", cap.err).group(1)
    output = (tmp_path / f"slurm-{job}.out").read_text()
    assert f"slurm job {job}: 1 node(s) [localhost]" in output
    assert sorted(re.findall(r"rank (\d)/2 on [^\n]*?n=29[^\n]*? OK", output)) == ["0", "1"], output
    assert "rank 0/2" in cap.out and "rank 1/2" in cap.out  # followed to the terminal as well
    assert (tmp_path / "allreduce_check.sbatch").read_text().startswith("#!/bin/bash")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_failed_slurm_job_returns_its_nonzero_status(slurm_env, tmp_path, capsys):
    script = tmp_path / "fail.py"
    script.write_text("import os, sys\nprint('rank', os.environ['RANK'], flush=True)\nsys.exit(3)\n")
    rc = run_script(str(script), scale="slurm", workers=1, timeout=240, job_dir=str(tmp_path))
    cap = capsys.readouterr()
    assert rc != 0, cap.out
    assert "rank 0" in cap.out and re.search(r"slurm job \d+ exited with status [1-9]", cap.err)


@pytest.mark.timeout(60)
def test_doctor_reports_the_private_controller_up(slurm_env):
    from scaleoutai.cluster.doctor import checks

    rows = {r.item: r for r in checks() if r.scale == "slurm"}
    assert rows["Slurm commands"].ok
    assert rows["controller"].ok, rows["controller"].detail
    assert str(slurm_env.conf) in rows["controller"].detail
