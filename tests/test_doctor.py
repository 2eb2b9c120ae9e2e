"""``scaleout doctor``: one row per thing a scale needs, what is here, what to install (Appendix B)."""
from __future__ import annotations

import json
import os
from importlib.metadata import version

from scaleoutai.cli import main as cli_main
from scaleoutai.cluster.doctor import checks, format_table, main


def _rows(**env):
    return {(r.scale, r.item): r for r in checks()}


def test_every_scale_has_a_row_and_missing_rows_say_what_to_install():
    rows = checks()
    assert {r.scale for r in rows} == {"local", "gpu", "torchrun", "slurm", "ray", "capstone"}
    assert all(r.fix for r in rows if not r.ok)


def test_doctor_reports_this_machines_cores_torch_and_ray_versions():
    import torch

    rows = _rows()
    usable = len(os.sched_getaffinity(0))
    assert rows[("local", "CPU cores")].detail.startswith(f"{usable} usable")
    assert torch.__version__ in rows[("local", "torch.distributed (gloo)")].detail
    assert rows[("gpu", "CUDA GPUs")].ok == torch.cuda.is_available()
    assert f"ray {version('ray')}" in rows[("ray", "Ray Train")].detail


def test_mlflow_row_names_the_tracking_store_in_use(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert "store http://mlflow:5000" in _rows()[("capstone", "MLflow")].detail
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert "store sqlite:///mlflow.db" in _rows()[("capstone", "MLflow")].detail


def test_unreachable_slurm_controller_is_reported_missing(monkeypatch, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nSlurmctldPort=1\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    row = _rows()[("slurm", "controller")]
    assert not row.ok and row.fix


def test_table_has_a_header_and_the_cli_exits_zero_with_json(capsys):
    assert format_table(checks()).splitlines()[0].split()[:3] == ["scale", "item", "status"]
    assert cli_main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"scale", "item", "ok", "detail", "fix"} <= set(data[0])
    assert main() == 0
