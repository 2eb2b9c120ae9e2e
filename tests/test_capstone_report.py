"""capstone.report: S_p, E_p, cost and the Pareto front from runs logged straight into a real MLflow store."""
from __future__ import annotations

import pytest

mlflow = pytest.importorskip("mlflow")

from mlflow.entities import Metric, Param  # noqa: E402

from scaleoutai.capstone import CapstoneError, aggregate, load_runs, pareto_front, report  # noqa: E402
from scaleoutai.capstone.tracking import open_experiment  # noqa: E402

pytestmark = pytest.mark.timeout(120)
PRICE = 0.1785


def log(uri, experiment, k, wall, role="distributed", status="FINISHED", verified="", with_cost=True):
    client, exp_id = open_experiment(experiment, uri)
    tags = {"scaleout.role": role, **({"scaleout.verified": verified} if verified else {})}
    run = client.create_run(exp_id, tags=tags)
    instances = 1 if role == "baseline" else k
    params = {"scale": "local", "instance_type": "aws-c7i.xlarge", "world_size": k, "price_per_hour": PRICE,
              "instances": instances, "price_source": "test", "price_date": "2024-06-01", "cpu_model": "cpu",
              "cpu_cores": 2, "gpu": "none"}
    metrics = {"wall_time": wall, "throughput": 1000 / wall, **({"cost": PRICE * instances * wall / 3600}
                                                               if with_cost else {})}
    client.log_batch(run.info.run_id, params=[Param(n, str(v)) for n, v in params.items()],
                     metrics=[Metric(n, v, 0, 0) for n, v in metrics.items()])
    client.set_terminated(run.info.run_id, status=status)


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    for wall in (9.0, 11.0):
        log(uri, "exp", 1, wall, role="baseline", with_cost=False)
    log(uri, "exp", 1, 12.0)
    for wall in (6.0, 5.0, 7.0):
        log(uri, "exp", 2, wall)
    log(uri, "exp", 4, 4.0)
    log(uri, "exp", 8, 1.0, status="FAILED")       # a crash is not a data point
    log(uri, "exp", 2, 0.1, verified="false")     # nor is a fast wrong answer
    for k, wall in ((2, 8.0), (4, 5.0)):           # no baseline, no K=1: the smallest K is the reference
        log(uri, "nobase", k, wall)
    return uri


def test_pareto_front_keeps_points_no_other_beats_in_time_and_cost():
    assert pareto_front([10, 12, 6, 4], [5, 6, 6, 8]) == [True, False, True, True]
    assert pareto_front([1, 1], [2, 2]) == [True, True]  # equal points do not dominate each other
    assert pareto_front([1, 2, 3], [1, 2, 3]) == [True, False, False]
    assert pareto_front([], []) == []


def test_aggregate_takes_medians_against_the_baseline_and_skips_failed_and_unverified(uri):
    rows = {r.label: r for r in aggregate(load_runs("exp", uri))}
    assert list(rows) == ["baseline", "K=1", "K=2", "K=4"]
    assert (rows["baseline"].runs, rows["K=2"].runs, rows["K=4"].runs) == (2, 3, 1)
    t1 = 10.0  # median of 9 and 11
    for label, k, tp in (("K=1", 1, 12.0), ("K=2", 2, 6.0), ("K=4", 4, 4.0)):
        assert rows[label].time == pytest.approx(tp)
        assert rows[label].speedup == pytest.approx(t1 / tp)
        assert rows[label].efficiency == pytest.approx(t1 / tp / k)
        assert rows[label].cost == pytest.approx(PRICE * k * tp / 3600)
    assert rows["baseline"].cost == pytest.approx(PRICE * 1 * t1 / 3600)  # computed when not logged
    assert rows["K=2"].throughput == pytest.approx(1000 / 6.0)
    assert [label for label, r in rows.items() if r.pareto] == ["baseline", "K=2", "K=4"]


def test_without_a_baseline_the_smallest_k_is_the_reference(uri):
    rows = aggregate(load_runs("nobase", uri))
    assert [(r.workers, r.speedup, r.efficiency) for r in rows] == [
        (2, 1.0, 1.0), (4, pytest.approx(8 / 5), pytest.approx(8 / 5 * 2 / 4))]


def test_report_writes_png_and_markdown_with_the_numbers(uri, tmp_path):
    rep = report("exp", out=tmp_path / "out", uri=uri)
    assert rep.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and rep.png.stat().st_size > 10_000
    text = rep.markdown.read_text()
    assert "# Capstone report: exp" in text and "![speedup, efficiency and cost](report.png)" in text
    assert "| local/aws-c7i.xlarge | K=2 | 3 | 6 | 1.667 | 0.833 |" in text
    assert "{{" not in text
    assert "9 runs: 7 used, 1 failed or killed, 1 failed the check against the baseline" in text
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.md", "report.png"]  # no temp left


def test_unknown_experiment_lists_the_available_ones(uri):
    with pytest.raises(CapstoneError, match=r"no experiment 'nope'.*available: .*exp.*nobase"):
        load_runs("nope", uri)


def test_experiment_without_a_finished_run_is_a_readable_error(uri):
    log(uri, "allfailed", 2, 1.0, status="FAILED")
    with pytest.raises(CapstoneError, match="no finished run"):
        aggregate(load_runs("allfailed", uri))
