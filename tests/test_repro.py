"""`scaleout repro`: a chapter exported with its parameters, pins, seeds, commands and MLflow runs, re-run to the
same reproducible numbers; a changed number or a broken chapter is caught (issue 21)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaleoutai.cli import main
from scaleoutai.errors import UserError
from scaleoutai.notebooks.repro import compare, package, split, verify

REPO = Path(__file__).resolve().parents[1]
CHAPTER = "appendix-a-mathematical-background"  # seeded numerics, no timing asserts: reruns exactly


def test_split_and_compare_keep_what_repeats_and_demand_it_back():
    same, measured = split({"n": 3, "err": 1e-3, "t": 0.51, "ok": True}, {"n": 3, "err": 1e-3, "t": 0.49, "ok": True})
    assert same == {"n": 3, "err": 1e-3, "ok": True} and measured == {"t": [0.51, 0.49]}
    assert split({"k": 1}, {"k": 1.0}) == ({}, {"k": [1, 1.0]})  # an int that became a float is not the same
    assert compare(same, {"n": 3, "err": 1e-3 * (1 + 1e-9), "ok": True, "t": 9.0}) == []
    problems = compare(same, {"n": 4, "err": 2e-3, "ok": 1})
    assert problems == ["err: 0.001 expected, got 0.002 (rtol 1e-06)", "n: 3 expected, got 4", "ok: True expected, got 1"]
    # last-bit differences of an error near machine epsilon (another CPU, another summation order) are allowed
    assert compare({"e": 2.2e-16}, {"e": 4.4e-16}) == []
    assert compare({"x": 1.0}, {}) == ["x: 1.0 expected, the re-run did not define it"]


@pytest.mark.notebooks
@pytest.mark.timeout(400)
def test_a_package_reruns_to_its_numbers_and_a_changed_one_fails(tmp_path, capsys):
    out = tmp_path / "pkg"
    assert main(["repro", CHAPTER, "--out", str(out), "--timeout", "240"]) == 0
    for name in ("run.sh", "README.md", "parameters.json", "seeds.json", "results.json", "mlflow.db",
                 "environment/constraints.txt", "environment/pip-freeze.txt", "environment/platform.json",
                 f"chapter/{CHAPTER}/{CHAPTER}.py", f"executed/{CHAPTER}.ipynb"):
        assert (out / name).is_file(), name
    assert (out / f"chapter/{CHAPTER}/{CHAPTER}.py").read_text() == (REPO / f"chapters/{CHAPTER}/{CHAPTER}.py").read_text()
    results = json.loads((out / "results.json").read_text())
    assert len(results["reproducible"]) >= 10, results
    env = json.loads((out / "environment/platform.json").read_text())
    assert env["versions"]["torch"] and len(env["commit"]) in (40, 7) or env["commit"] == "unknown"
    assert "torch==" in (out / "environment/pip-freeze.txt").read_text()
    params = json.loads((out / "parameters.json").read_text())
    assert params["size"] == "smoke" and params["injected"]

    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(f"repro-{CHAPTER}")
    assert experiment.artifact_location == (out / "mlartifacts").as_uri()  # where the package lives, not its temp
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 2 and all(r.data.params == runs[0].data.params for r in runs)
    key, value = next((k, v) for k, v in sorted(results["reproducible"].items()) if isinstance(v, float) and v)
    assert runs[0].data.metrics[key] == pytest.approx(value)

    # one re-run: every number comes back but the one changed in results.json, which the CLI names
    tampered = dict(results, reproducible={**results["reproducible"], key: value * 1.01})
    (out / "results.json").write_text(json.dumps(tampered))
    capsys.readouterr()
    assert main(["repro", "--verify", str(out), "--timeout", "240"]) == 1
    report = capsys.readouterr().out
    assert f"not reproduced: {key}: {value * 1.01!r} expected, got {value!r}" in report and "1 number(s) not reproduced" in report
    chapter = out / f"chapter/{CHAPTER}/{CHAPTER}.py"
    # the failing assert goes into the parameters cell, the chapter's first code cell: it fails at once
    text = chapter.read_text()
    cut = text.index("\n", text.index('# %% tags=["parameters"]')) + 1
    chapter.write_text(text[:cut] + "assert False, 'a chapter whose assert no longer holds'\n" + text[cut:])
    with pytest.raises(UserError, match=r"did not run to the end \(failed\).*a chapter whose assert no longer holds"):
        verify(out, timeout=240)


def test_repro_errors_are_one_line(tmp_path, capsys):
    assert main(["repro", "zz-no-such", "--out", str(tmp_path / "x")]) == 2
    assert "no notebook matches 'zz-no-such'" in capsys.readouterr().err
    assert main(["repro", CHAPTER]) == 2
    assert "give a chapter and --out DIR" in capsys.readouterr().err
    assert main(["repro", CHAPTER, "--out", str(tmp_path / "x"), "--param", "N"]) == 2
    assert "write NAME=VALUE" in capsys.readouterr().err
    assert main(["repro", "--verify", str(tmp_path)]) == 2
    assert "is not a reproducibility package" in capsys.readouterr().err
    with pytest.raises(UserError, match="inside the course's own sources"):
        package(REPO, CHAPTER, REPO / "chapters" / "pkg")
