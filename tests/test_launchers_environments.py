"""environments/ and docker/: cluster configs valid against Ray's own schema, images pinned (Appendix B)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "environments"


def _ray_schema() -> dict:
    ray = pytest.importorskip("ray", reason="Ray not installed: pip install -e '.[scale]'")
    return json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_ray_cluster_yaml_validates_against_rays_schema(cloud):
    import jsonschema

    config = yaml.safe_load((ENV / "cloud" / f"ray-cluster-{cloud}.yaml").read_text())
    jsonschema.validate(config, _ray_schema())
    assert config["provider"]["type"] == cloud
    assert config["head_node_type"] in config["available_node_types"]
    assert any("constraints.txt" in c for c in config["setup_commands"])
    assert any("torch==2.13.0" in c for c in config["setup_commands"])


def test_schema_check_rejects_a_broken_cluster_yaml():
    import jsonschema

    config = yaml.safe_load((ENV / "cloud" / "ray-cluster-aws.yaml").read_text())
    del config["available_node_types"]["head"]["node_config"]
    with pytest.raises(jsonschema.ValidationError, match="node_config"):
        jsonschema.validate(config, _ray_schema())


def test_rayjob_manifest_has_the_fields_kuberay_requires():
    job = yaml.safe_load((ENV / "cloud" / "rayjob.yaml").read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob" and job["metadata"]["name"]
    spec = job["spec"]
    assert spec["entrypoint"].startswith("scaleout run ") and "--scale ray" in spec["entrypoint"]
    cluster = spec["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    for group in cluster["workerGroupSpecs"]:
        assert group["groupName"] and group["template"]["spec"]["containers"][0]["image"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    from importlib.metadata import version

    assert cluster["rayVersion"] == version("ray")  # the same Ray as constraints.txt


def test_sbatch_template_and_install_script_are_valid_bash():
    assert "@{script}" in (ENV / "slurm" / "sbatch.template").read_text()
    subprocess.run(["bash", "-n", str(ENV / "slurm" / "install-ci.sh")], check=True)


def test_pinned_requirements_reference_the_constraints_file():
    pins = dict(line.split("==") for line in (ENV / "constraints.txt").read_text().split() if "==" in line)
    assert pins["torch"] == "2.13.0"
    for name in ("local", "gpu"):
        text = (ENV / name / "requirements.txt").read_text()
        assert "-c ../constraints.txt" in text
    for name in ("local", "gpu", "slurm", "cloud"):
        assert (ENV / name / "README.md").read_text().startswith("# Scale:")


def test_compose_runs_lab_mlflow_and_an_offline_grader():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert {"jupyterlab", "mlflow", "grader"} <= set(services)
    assert services["grader"]["network_mode"] == "none"
    assert "sqlite:" in " ".join(services["mlflow"]["command"])
    assert any(v.startswith("mlflow-data:") for v in services["mlflow"]["volumes"])
    assert services["jupyterlab"]["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    for svc in ("jupyterlab", "grader"):
        assert (ROOT / "docker" / Path(services[svc]["build"]["dockerfile"]).name).exists()


@pytest.mark.parametrize("image", ["Dockerfile.student", "Dockerfile.grader"])
def test_images_pin_torch_and_install_with_the_constraints(image):
    text = (ROOT / "docker" / image).read_text()
    torch_line = next(i for i, l in enumerate(text.splitlines()) if "torch==2.13.0" in l)
    project_line = next(i for i, l in enumerate(text.splitlines()) if "-c environments/constraints.txt" in l)
    assert torch_line < project_line  # torch first: an unpinned resolve pulls the CUDA wheels
    assert re.search(r"^FROM python:3\.11-slim-bookworm$", text, re.M)
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users and users[-1] not in ("root", "0")  # the last USER is not root
