"""scale "k8s": an Indexed Job running torchrun, checked offline against the Kubernetes API schema (Appendix B)."""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from scaleoutai.cli import main
from scaleoutai.cluster.launchers import run_script
from scaleoutai.cluster.launchers.k8s import SCHEMA_VERSION, job_name, render_k8s, validate

kv = pytest.importorskip("kubernetes_validate", reason="pip install -e '.[infra]' (kubernetes-validate)")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "allreduce_check.py")
VERSIONS = [SCHEMA_VERSION, kv.utils.latest_version()]  # the oldest we promise and the newest shipped
RDZV = ("--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--node-rank", "--master-addr", "--master-port")


def _dry_run(capsys, *argv: str) -> str:
    assert main(["run", "--dry-run", *argv]) == 0
    return capsys.readouterr().out


def _manifests(capsys, *argv: str) -> dict[str, dict]:
    docs = list(yaml.safe_load_all(_dry_run(capsys, EXAMPLE, "--scale", "k8s", *argv)))
    return {d["kind"]: d for d in docs}


def _container(job: dict) -> dict:
    return job["spec"]["template"]["spec"]["containers"][0]


VARIANTS = {
    "cpu-1-node": ["--nodes", "1", "--workers", "1"],
    "cpu-4-nodes": ["--nodes", "4", "--workers", "2"],
    "gpu": ["--nodes", "2", "--workers", "4", "--gpus-per-node", "4"],
    "namespace-image": ["--nodes", "2", "--namespace", "course-2026",
                        "--image", "registry.example.com:5000/team/scaleout-ai-student:0.1.0"],
    "env-args-timeout": ["--nodes", "3", "--env", "SEED=$(7)", "--timeout", "90.5", "--max-restarts", "1",
                         "--", "--length", "$(HOME)"],
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_variant_validates_strictly_against_the_kubernetes_schema(capsys, variant, version):
    docs = _manifests(capsys, *VARIANTS[variant])
    assert set(docs) == {"ConfigMap", "Service", "Job"}
    validate(list(docs.values()), version)


@pytest.mark.parametrize("break_it, words", [
    (lambda job: job["spec"].__setitem__("completions", "two"), "is not of type 'integer'"),
    (lambda job: _container(job).__setitem__("gpus", 1), "'gpus' was unexpected"),
    (lambda job: job["spec"]["template"]["spec"].pop("containers"), "'containers' is a required property"),
])
def test_the_schema_check_rejects_a_broken_manifest(capsys, break_it, words):
    job = _manifests(capsys, "--nodes", "2")["Job"]
    validate([job])
    break_it(job)
    with pytest.raises(kv.ValidationError, match=re.escape(words)):
        validate([job])


def test_the_job_is_indexed_and_pod_zero_is_the_master_by_a_stable_dns_name(capsys):
    docs = _manifests(capsys, "--nodes", "4", "--workers", "3")
    job, svc, cm = docs["Job"], docs["Service"], docs["ConfigMap"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 4
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] > 0 and spec["ttlSecondsAfterFinished"] > 0
    assert pod["restartPolicy"] == "Never"
    # headless Service selecting exactly the Job's pods, and the pods in its subdomain: <job>-i.<service>
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    c = _container(job)
    assert f"--master-addr={job['metadata']['name']}-0.{svc['metadata']['name']}" in c["args"]
    assert "--node-rank=$(NODE_RANK)" in c["args"] and "--nproc-per-node=3" in c["args"]
    rank = next(e for e in c["env"] if e["name"] == "NODE_RANK")
    assert rank["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    # the script travels in the ConfigMap, byte for byte, mounted where the command looks for it
    mount = c["volumeMounts"][0]
    assert pod["volumes"][0]["configMap"]["name"] == cm["metadata"]["name"] and mount["readOnly"]
    assert f"{mount['mountPath']}/allreduce_check.py" in c["args"]
    assert cm["data"]["allreduce_check.py"] == Path(EXAMPLE).read_text()
    assert c["resources"]["requests"]["cpu"] == "3" and "nvidia.com/gpu" not in c["resources"]["limits"]
    assert all("namespace" not in d["metadata"] for d in docs.values())  # kubectl's current namespace


def test_gpus_namespace_image_and_timeout_reach_the_manifests(capsys):
    docs = _manifests(capsys, "--gpus-per-node", "2", "--workers", "2", "--namespace", "lab", "--image",
                      "ghcr.io/course/img:1", "--timeout", "90.5")
    c = _container(docs["Job"])
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "2" and c["image"] == "ghcr.io/course/img:1"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert docs["Job"]["spec"]["activeDeadlineSeconds"] == 91
    assert {d["metadata"]["namespace"] for d in docs.values()} == {"lab"}


def test_the_pod_runs_the_torchrun_arguments_of_the_torchrun_scale(capsys):
    args = ["--nodes", "3", "--workers", "2", "--max-restarts", "2", "--", "--length", "37"]
    torchrun = shlex.split(_dry_run(capsys, EXAMPLE, "--scale", "torchrun", *args).splitlines()[-1])
    c = _container(_manifests(capsys, *args)["Job"])
    pod = c["command"] + c["args"]

    def same(cmd: list[str]) -> list[str]:  # all but the rendezvous; the script by its name
        return [Path(a).name if a.endswith(".py") else a for a in cmd if not a.startswith(RDZV)]

    assert same(pod) == same(torchrun) == ["torchrun", "--nnodes=3", "--nproc-per-node=2", "--max-restarts=2",
                                           "allreduce_check.py", "--length", "37"]


def _kubelet_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of command, args and env values: ``$$`` is ``$``, ``$(NAME)`` a defined variable."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def test_dollar_signs_in_the_users_args_and_env_reach_the_script_literally(capsys):
    c = _container(_manifests(capsys, "--env", "SEED=$(7)", "--", "--tag", "$(HOME)$x")["Job"])
    env = {"NODE_RANK": "1"}
    assert [_kubelet_expand(a, env) for a in c["args"][-2:]] == ["--tag", "$(HOME)$x"]
    assert "--node-rank=1" in [_kubelet_expand(a, env) for a in c["args"]]
    seed = next(e for e in c["env"] if e["name"] == "SEED")
    assert _kubelet_expand(seed["value"], env) == "$(7)"


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_rendered_pod_command_runs_two_nodes_as_one_world_with_node_rank_the_index(tmp_path, capsys):
    from scaleoutai.cluster.launchers.local import run_group
    from scaleoutai.cluster.procs import free_port

    docs = _manifests(capsys, "--nodes", "2", "--workers", "1", "--", "--length", "37")
    c, cm = _container(docs["Job"]), docs["ConfigMap"]
    mount = Path(str(tmp_path) + c["volumeMounts"][0]["mountPath"])  # the ConfigMap, as the kubelet mounts it
    mount.mkdir(parents=True)
    for key, text in cm["data"].items():
        (mount / key).write_text(text)
    port, cmds, envs = free_port(), [], []
    for index in range(2):  # pod i: what the kubelet runs, on loopback instead of <job>-0.<service>
        env = {"NODE_RANK": str(index)}
        env.update({e["name"]: _kubelet_expand(e["value"], env) for e in c["env"] if "value" in e})
        args = [_kubelet_expand(a, env) for a in c["args"]]
        args = [f"--master-addr=127.0.0.1" if a.startswith("--master-addr=") else
                f"--master-port={port}" if a.startswith("--master-port=") else
                str(tmp_path) + a if a.startswith(c["volumeMounts"][0]["mountPath"]) else a for a in args]
        cmds.append([sys.executable, "-m", "torch.distributed.run", *args])
        envs.append({**os.environ, **env, "GLOO_SOCKET_IFNAME": "lo"})
    rc = run_group(cmds, envs, ["pod 0", "pod 1"], timeout=170)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert re.search(r"^\[pod 0\] rank 0/2 .* OK$", out, re.M), out  # node rank = completion index
    assert re.search(r"^\[pod 1\] rank 1/2 .* OK$", out, re.M), out


def test_repository_templates_validate_and_equal_the_renderers_output():
    templates = sorted((ROOT / "environments" / "k8s").glob("*.yaml"))
    assert templates
    for path in templates:
        docs = list(yaml.safe_load_all(path.read_text()))
        for version in VERSIONS:
            validate(docs, version)
    docs = list(yaml.safe_load_all((ROOT / "environments" / "k8s" / "torchrun-job.yaml").read_text()))
    assert docs == render_k8s("examples/allreduce_check.py", nodes=2, nproc_per_node=2,
                              image="registry.example.com/scaleout-ai-student:0.1.0",
                              name="scaleout-allreduce-check", ship_script=False,
                              working_dir="/home/student/scaleout-ai")
    assert (ROOT / "examples" / "allreduce_check.py").is_file()  # the path the pods run, in the image


def test_environment_readmes_name_every_scale():
    assert (ROOT / "environments" / "k8s" / "README.md").read_text().startswith("# Scale:")
    table = (ROOT / "environments" / "README.md").read_text()
    for folder in ("local/", "gpu/", "slurm/", "cloud/", "k8s/", "rayjob.yaml", "Indexed Job"):
        assert folder in table


@pytest.mark.parametrize("name, expected", [
    ("allreduce_check.py", "allreduce-check"), ("My__Script.v2.py", "my-script-v2"), ("123.py", "job-123"),
    ("___.py", "scaleout"), ("x" * 90 + ".py", "x" * 40),
])
def test_job_names_are_dns_labels_short_enough_for_pod_host_names(name, expected):
    assert job_name(name) == expected


@pytest.mark.parametrize("argv, words", [
    (["--nodes", "0"], "nodes must be a whole number >= 1"),
    (["--image", "my image:1"], "is not a container image name"),
    (["--image", ""], "is not a container image name"),
    (["--namespace", "Course_1"], "is not a Kubernetes namespace name"),
    (["--workers", "-1"], "workers must be a whole number >= 1"),
])
def test_bad_k8s_options_exit_2_with_one_line(capsys, argv, words):
    assert main(["run", EXAMPLE, "--scale", "k8s", *argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("body, words", [(None, "no script at"), (b"\xff\xfe", "is not UTF-8 text")])
def test_a_missing_or_binary_script_exits_2_with_one_line(tmp_path, capsys, body, words):
    script = tmp_path / "train.py"
    if body is not None:
        script.write_bytes(body)
    assert main(["run", str(script), "--scale", "k8s", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_k8s_options_on_another_scale_are_refused(capsys):
    assert main(["run", EXAMPLE, "--scale", "slurm", "--image", "x:1", "--dry-run"]) == 2
    assert "--image applies to --scale k8s only" in capsys.readouterr().err


def test_without_kubectl_the_run_says_to_install_it_or_use_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no kubectl
    assert main(["run", EXAMPLE, "--scale", "k8s"]) == 2
    err = capsys.readouterr().err
    assert "kubectl is not on PATH" in err and "--dry-run" in err and len(err.strip().splitlines()) == 1


@pytest.mark.timeout(60)
def test_kubectl_apply_runs_and_its_failure_is_the_commands_status(tmp_path, monkeypatch, capfd):
    import shutil

    from scaleoutai.cluster.procs import free_port

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed")
    config = tmp_path / "kubeconfig"  # a cluster nobody listens for: kubectl itself must report it
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
        "users": [{"name": "none", "user": {"token": "none"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert run_script(EXAMPLE, scale="k8s", nodes=2, workers=1) == 1
    assert "127.0.0.1" in capfd.readouterr().err  # kubectl's own message: it tried that server
