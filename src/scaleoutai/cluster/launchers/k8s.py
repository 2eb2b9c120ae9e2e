"""Scale "k8s": torchrun in a Kubernetes Indexed Job, one pod per node (Appendix B).

``render_k8s`` returns three manifests: a ConfigMap holding the script (so a student needs no image of
their own: the course image provides Python, torch and ``scaleoutai``, the ConfigMap the script), a
headless Service that gives each pod a stable DNS name, and a ``batch/v1`` Job with
``completionMode: Indexed`` and ``completions = parallelism = nodes``. Pod i is ``<job>-i.<job>``; every
pod runs ``torchrun --nnodes=N --nproc-per-node=W`` with node rank i and pod 0 as the master, then the
script, whose ``cluster.init()`` reads the RANK/WORLD_SIZE/MASTER_* variables torchrun sets.

Why static rendezvous and not c10d as on the other scales: torchrun ignores ``--node-rank`` under c10d,
and a c10d agent decides it hosts the rendezvous store only if the endpoint's name already resolves to
its own address, which races the DNS record of pod 0 (then every agent waits as a client until the
timeout). Under static rendezvous node rank = completion index and agent 0 always hosts the store;
the others retry until pod 0's name resolves. Fail fast: ``backoffLimit: 0`` (one failed pod fails the
Job and the controller stops the rest), ``activeDeadlineSeconds`` (pods that never start or hang end
too), ``ttlSecondsAfterFinished`` (the finished Job and its logs are removed after an hour).

Every rendered manifest is validated offline against the Kubernetes API schema in strict mode
(``kubernetes-validate``, which ships the schemas) before it is printed or applied.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...errors import UserError
from .local import TIMEOUT_STATUS

DEFAULT_IMAGE = "scaleout-ai-student:0.1.0"  # docker/Dockerfile.student, built from the student edition
SCHEMA_VERSION = "1.30"  # the oldest Kubernetes release the manifests are checked against
MASTER_PORT = 29500
SCRIPT_DIR = "/opt/scaleout"  # where the ConfigMap is mounted in each pod
MAX_SCRIPT_BYTES = 1_000_000  # a ConfigMap holds at most 1 MiB
INSTANCE_LABEL = "app.kubernetes.io/instance"

# A container image reference (distribution's grammar, simplified): [host[:port]/]path[:tag][@digest].
_IMAGE = re.compile(r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                    r"(?:@sha256:[0-9a-f]{64})?$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1123 label: namespaces
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")  # what a ConfigMap data key may be


def job_name(script: str) -> str:
    """A DNS-1035 name from the script's stem, short enough for ``<job>-<index>`` host names."""
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", Path(script).stem.lower())).strip("-")[:40].strip("-")
    if not name:
        return "scaleout"
    return name if name[0].isalpha() else f"job-{name}"


def _escape(text: str) -> str:
    """Kubernetes expands ``$(VAR)`` in args and env values; ``$$`` keeps a user's text literal."""
    return text.replace("$", "$$")


def pod_command(nodes: int, nproc_per_node: int, master_addr: str, script_path: str,
                script_args: Sequence[str] = (), max_restarts: int = 0) -> list[str]:
    """What each pod runs: torchrun's arguments as ``--scale torchrun`` has them, static rendezvous."""
    return ["torchrun", f"--nnodes={nodes}", f"--nproc-per-node={nproc_per_node}", "--rdzv-backend=static",
            "--node-rank=$(NODE_RANK)", f"--master-addr={master_addr}", f"--master-port={MASTER_PORT}",
            f"--max-restarts={max_restarts}", script_path, *(_escape(a) for a in script_args)]


def _check(script: str, image: str, namespace: str | None, ship_script: bool) -> None:
    if not isinstance(image, str) or not _IMAGE.match(image):
        raise UserError(f"--image {image!r} is not a container image name (e.g. registry.example.com/"
                        f"scaleout-ai-student:0.1.0): no spaces, lower-case repository")
    if namespace is not None and not _LABEL.match(namespace):
        raise UserError(f"--namespace {namespace!r} is not a Kubernetes namespace name (lower-case letters, "
                        f"digits and '-', at most 63)")
    if ship_script:
        if not os.path.isfile(script):
            raise UserError(f"no script at {script!r}: give the path of a Python file that calls cluster.init()")
        if not _CONFIG_KEY.match(os.path.basename(script)):
            raise UserError(f"script name {os.path.basename(script)!r}: use letters, digits, '-', '_' and '.' "
                            f"only (it becomes a ConfigMap key)")
        if os.path.getsize(script) > MAX_SCRIPT_BYTES:
            raise UserError(f"{script} is larger than a ConfigMap can hold (1 MiB): build it into the image")


def _metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:  # else kubectl's current namespace
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def render_k8s(script: str, nodes: int = 1, nproc_per_node: int = 2, gpus_per_node: int = 0,
               script_args: Sequence[str] = (), env: Mapping[str, str] | None = None, max_restarts: int = 0,
               image: str = DEFAULT_IMAGE, namespace: str | None = None, name: str | None = None,
               deadline_s: int = 1800, backoff_limit: int = 0, ttl_s: int = 3600, cpu: str | None = None,
               memory: str | None = None, ship_script: bool = True,
               working_dir: str | None = None) -> list[dict[str, Any]]:
    """ConfigMap (when ``ship_script``), headless Service and Indexed Job, as plain dicts.

    ``ship_script=False``: the script is expected in the image, at ``script`` relative to its working
    directory (``working_dir``, else the image's; the student image holds the course at
    /home/student/scaleout-ai). Defaults per pod: ``cpu`` = ranks, ``memory`` = 2Gi per rank.
    """
    _check(script, image, namespace, ship_script)
    name = name or job_name(script)
    labels = {INSTANCE_LABEL: name, "app.kubernetes.io/part-of": "scaleout-ai"}
    docs: list[dict[str, Any]] = []
    volumes, mounts = [], []
    if ship_script:
        base = os.path.basename(script)
        try:
            text = Path(script).read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"{script} is not UTF-8 text: a ConfigMap carries the script as text") from exc
        meta = _metadata(f"{name}-script", namespace, labels)
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {base: text}})
        volumes.append({"name": "script", "configMap": {"name": f"{name}-script"}})
        mounts.append({"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True})
        path = f"{SCRIPT_DIR}/{base}"
    else:
        path = script
    # publishNotReadyAddresses: the DNS names exist as soon as the pods do, not after a readiness probe.
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": _metadata(name, namespace, labels),
                 "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {INSTANCE_LABEL: name},
                          "ports": [{"name": "torchrun", "port": MASTER_PORT, "targetPort": MASTER_PORT}]}})
    amount = {"cpu": cpu or str(nproc_per_node), "memory": memory or f"{2 * nproc_per_node}Gi"}
    limits = dict(amount, **({"nvidia.com/gpu": str(gpus_per_node)} if gpus_per_node else {}))
    container_env = [
        {"name": "NODE_RANK",  # the pod's completion index, 0..nodes-1
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        *({"name": str(k), "value": _escape(str(v))} for k, v in (env or {}).items())]
    cmd = pod_command(nodes, nproc_per_node, f"{name}-0.{name}", path, script_args, max_restarts)
    container: dict[str, Any] = {"name": "torchrun", "image": image, "command": cmd[:1], "args": cmd[1:],
                                 "env": container_env, "ports": [{"containerPort": MASTER_PORT, "name": "torchrun"}],
                                 "resources": {"requests": amount, "limits": limits}}
    if working_dir:
        container["workingDir"] = working_dir
    pod: dict[str, Any] = {"subdomain": name, "restartPolicy": "Never", "enableServiceLinks": False,
                           "containers": [container]}
    if gpus_per_node:
        # NCCL passes data between the ranks of one pod through /dev/shm, which is 64 MiB by default.
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if mounts:
        container["volumeMounts"] = mounts
        pod["volumes"] = volumes
    docs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": _metadata(name, namespace, labels),
                 "spec": {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
                          "backoffLimit": backoff_limit, "activeDeadlineSeconds": deadline_s,
                          "ttlSecondsAfterFinished": ttl_s,
                          "template": {"metadata": {"labels": labels}, "spec": pod}}})
    return docs


def to_yaml(docs: Sequence[Mapping[str, Any]]) -> str:
    """The manifests as one multi-document YAML stream, in the order they must be applied."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        # The script reads as a block (``|``), not as one escaped line; PyYAML falls back to quotes
        # by itself where a block cannot hold the text exactly (trailing spaces, tabs).
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    return yaml.dump_all(list(docs), Dumper=Dumper, sort_keys=False, default_flow_style=False, width=100)


def _kubernetes_validate() -> Any:
    try:
        import kubernetes_validate
    except ImportError as exc:
        raise UserError("the k8s scale checks its manifests with kubernetes-validate: "
                        "pip install -c environments/constraints.txt -e '.[infra]'") from exc
    return kubernetes_validate


def validate(docs: Sequence[Mapping[str, Any]], version: str = SCHEMA_VERSION) -> None:
    """Check each manifest against Kubernetes ``version``'s API schema, strict (unknown fields fail).

    Raises ``kubernetes_validate.ValidationError`` naming the field; offline: the schemas ship in the package.
    """
    kv = _kubernetes_validate()
    for doc in docs:
        kv.validate(dict(doc), version, strict=True)


def run_k8s(script: str, nodes: int, nproc_per_node: int, gpus_per_node: int, script_args: Sequence[str],
            extra_env: Mapping[str, str], dry_run: bool, timeout: float | None, max_restarts: int = 0,
            image: str | None = None, namespace: str | None = None) -> int:
    """Render and validate the manifests; print them (dry run) or ``kubectl apply`` them."""
    deadline = 1800 if timeout is None else max(1, math.ceil(timeout))
    docs = render_k8s(script, nodes, nproc_per_node, gpus_per_node, script_args, extra_env, max_restarts,
                      image=DEFAULT_IMAGE if image is None else image, namespace=namespace, deadline_s=deadline)
    kv = _kubernetes_validate()
    try:
        validate(docs)
    except kv.ValidationError as exc:
        where = ".".join(str(part) for part in exc.absolute_path)
        raise UserError(f"the rendered manifest does not fit Kubernetes {SCHEMA_VERSION}'s schema at "
                        f"{where or 'the top'}: {exc.message}") from exc
    text = to_yaml(docs)
    if dry_run:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise UserError("kubectl is not on PATH: install it (https://kubernetes.io/docs/tasks/tools/) and "
                        "point it at your cluster, or use --dry-run to print the manifests")
    with tempfile.TemporaryDirectory(prefix="scaleout-k8s-") as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_text(text)
        try:
            done = subprocess.run([kubectl, "apply", "-f", str(path)], stdin=subprocess.DEVNULL, timeout=120,
                                  check=False)
        except subprocess.TimeoutExpired:
            print("scaleout run: kubectl apply did not answer in 120 s", file=sys.stderr)
            return TIMEOUT_STATUS
    name, ns = docs[-1]["metadata"]["name"], f" -n {namespace}" if namespace else ""
    if done.returncode == 0:
        print(f"scaleout run: applied job {name}; follow it with\n"
              f"  kubectl logs{ns} -f -l {INSTANCE_LABEL}={name} --prefix --max-log-requests={nodes}\n"
              f"  kubectl wait{ns} --for=condition=Complete job/{name} --timeout={deadline}s\n"
              f"and remove it with: kubectl delete{ns} job,service,configmap -l {INSTANCE_LABEL}={name}",
              file=sys.stderr)
    return done.returncode
