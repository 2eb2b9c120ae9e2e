"""The capstone starter options (capstone/options/*): each sweeps and reports at smoke size with every run
verified against its baseline, a planted bug (one shard dropped) is caught, and each README maps the rubric."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from scaleoutai.cli import main

OPTIONS = Path(__file__).resolve().parents[1] / "capstone" / "options"
NAMES = ("training-benchmark", "rag-service", "federated-study", "stream-pipeline", "multi-agent",
         "cluster-scheduling")
RUBRIC_ITEMS = ("Problem", "Distribution axis", "Single-machine baseline", "Design of the distributed version",
                "Tools and infrastructure", "Speedup, efficiency and cost", "Reproducibility package", "Report")

# The smoke arguments of each option: the README's smoke command uses exactly these (checked below).
SMOKE = {
    "training-benchmark": ["--strategy", "fsdp", "--steps", "8", "--hidden", "128", "--layers", "2",
                           "--batch", "256"],
    "rag-service": ["--countries", "300", "--distractors", "3000", "--queries", "1500"],
    "federated-study": ["--n", "4000", "--clients", "8", "--rounds", "8"],
    "stream-pipeline": ["--n", "100000"],
    "multi-agent": ["--n", "4000", "--steps", "20"],
    "cluster-scheduling": ["--jobs", "1000", "--seeds", "4", "--loads", "0.7,0.9"],
}
# Two more training strategies: one K=2 run each (the fsdp sweep runs the baseline and K=1, 2).
OTHER_STRATEGIES = ("ddp", "zero3")  # zero1 and zero2 share zero3's code path (parallel.zero)

# A wrong distributed run: the variant imports the option's own modules and drops the last rank's shard.
BUGS = {
    "training-benchmark": """
        orig = problem.my_rows
        problem.my_rows = lambda X, rank, size: X[:0] if size > 1 and rank == size - 1 else orig(X, rank, size)
    """,
    "rag-service": """
        orig = problem.my_block
        problem.my_block = lambda n, rank, size: (0, 0) if size > 1 and rank == size - 1 else orig(n, rank, size)
    """,
    "federated-study": """
        from scaleoutai.ml import federated as fd
        orig = fd.train_fedavg
        def dropped(comm, w0, like, shards, **kw):
            (X, y) = shards[-1]
            return orig(comm, w0, like, shards[:-1] + [(X[:0], y[:0])], **kw)
        fd.train_fedavg = dropped
    """,
    "stream-pipeline": """
        orig = problem.read_block
        problem.read_block = lambda b, rank, size: b[:0] if size > 1 and rank == size - 1 else orig(b, rank, size)
    """,
    "multi-agent": """
        orig = problem.my_boids
        problem.my_boids = lambda rows, rank, size, box: rows[:0] if size > 1 and rank == size - 1 else orig(rows, rank, size, box)
    """,
    "cluster-scheduling": """
        orig = problem.my_cells
        problem.my_cells = lambda n, rank, size: range(0) if size > 1 and rank == size - 1 else orig(n, rank, size)
    """,
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An MLflow store in tmp_path, run from tmp_path, and no bytecode written into the option folders."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def option_files(name: str) -> set[str]:
    return {str(p.relative_to(OPTIONS / name)) for p in (OPTIONS / name).rglob("*")
            if "__pycache__" not in p.parts}


def sweep(script: Path, experiment: str, uri: str, args: list[str], workers: str = "1,2",
          baseline: Path | None = None) -> int:
    argv = ["capstone", "sweep", str(script), "--workers", workers, "--experiment", experiment,
            "--tracking-uri", uri, "--timeout", "120", "--no-progress"]
    if baseline is not None:
        argv += ["--baseline", str(baseline)]
    return main(argv + ["--", *args])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", NAMES)
def test_option_sweeps_and_reports_with_every_run_verified(name, store, tmp_path, capsys):
    from scaleoutai.capstone import load_runs

    if name == "rag-service":
        pytest.importorskip("faiss")
    folder, before = OPTIONS / name, option_files(name)
    status = sweep(folder / "distributed.py", name, store, SMOKE[name], baseline=folder / "baseline.py")
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.count("matches the baseline") == 2 and "DIFFERS" not in out, out
    runs = load_runs(name, store)
    assert sorted(r["trial"] for r in runs) == ["K=1#0", "K=2#0", "baseline#0"]
    assert all(r["status"] == "FINISHED" for r in runs)
    assert all(r["verified"] == "true" for r in runs if r["role"] == "distributed")
    assert main(["capstone", "report", "--experiment", name, "--tracking-uri", store,
                 "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert (tmp_path / "rep" / "report.png").stat().st_size > 10_000
    assert re.findall(r"\| local/local-laptop \| (baseline|K=1|K=2) \|", md) == ["baseline", "K=1", "K=2"]
    if name == "training-benchmark":  # the other strategies, one verified K=2 run each
        for strategy in OTHER_STRATEGIES:
            args = SMOKE[name][:1] + [strategy] + SMOKE[name][2:]
            assert sweep(folder / "distributed.py", f"train-{strategy}", store, args, workers="2") == 0
            assert [r["verified"] for r in load_runs(f"train-{strategy}", store)] == ["true"]
        assert capsys.readouterr().out.count("matches the baseline") == len(OTHER_STRATEGIES)
    assert option_files(name) == before  # nothing written into the folder a student copies


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", NAMES)
def test_a_dropped_shard_is_caught_by_the_verification(name, store, tmp_path, capsys):
    from scaleoutai.capstone import load_runs

    if name == "rag-service":
        pytest.importorskip("faiss")
    variant = tmp_path / "wrong.py"
    variant.write_text("import sys\n"
                       f"sys.path.insert(0, {str(OPTIONS / name)!r})\n"
                       "import problem, distributed\n"
                       + textwrap.dedent(BUGS[name])
                       + "sys.exit(distributed.main())\n")
    status = sweep(variant, "bug", store, SMOKE[name], workers="2")
    out = capsys.readouterr().out
    # the sweep fails, names the failed trial, and the run is marked wrong (it never reaches the table)
    assert status == 1, out
    assert "DIFFERS from the baseline" in out and "FAILED: " in out and "(no finished run)" in out, out
    runs = load_runs("bug", store)
    assert [(r["status"], r["verified"]) for r in runs] == [("FINISHED", "false")]


@pytest.mark.parametrize("name", NAMES)
def test_readme_maps_every_rubric_item_and_gives_the_smoke_command(name):
    text = (OPTIONS / name / "README.md").read_text()
    assert "## Rubric mapping" in text
    table = text.split("## Rubric mapping", 1)[1]
    for i, item in enumerate(RUBRIC_ITEMS, 1):
        assert re.search(rf"^\| {i} \| {re.escape(item)} \|", table, re.M), f"{name}: rubric item {i} {item!r}"
    assert " ".join(SMOKE[name]) in text, f"{name}: the README's smoke command differs from the CI smoke size"
    assert "scaleout capstone sweep" in text and "scaleout capstone report" in text
    for f in ("problem.py", "baseline.py", "distributed.py"):
        assert (OPTIONS / name / f).is_file()


def test_options_index_lists_every_option():
    text = (OPTIONS / "README.md").read_text()
    for name in NAMES:
        assert f"[`{name}`]({name}/)" in text
    assert "capstone/template" in text
