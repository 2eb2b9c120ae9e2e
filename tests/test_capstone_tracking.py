"""capstone.tracking against a real MLflow sqlite store (one store per module: its migrations take seconds)."""
from __future__ import annotations

import time

import pytest

mlflow = pytest.importorskip("mlflow")

from scaleoutai import cluster  # noqa: E402
from scaleoutai.capstone import CapstoneError, NullRun, Run, track  # noqa: E402
from scaleoutai.capstone.tracking import RESERVED  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    return f"sqlite:///{db}"


def runs_of(uri: str, experiment: str):
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id])


def test_track_logs_every_param_metric_and_artifact(store, tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEOUT_LAUNCH_TIME", repr(time.time() - 2.0))
    monkeypatch.setenv("SCALEOUT_INSTANCE_TYPE", "aws-c7i.xlarge")
    monkeypatch.setenv("SCALEOUT_INSTANCES", "3")
    (tmp_path / "w.txt").write_text("weights")
    with track(None, experiment="full", params={"n": 100}, problem="toy", uri=store, baseline=True) as run:
        assert isinstance(run, Run)
        time.sleep(0.05)
        run.log_items(1000)
        run.log_artifact(tmp_path / "w.txt")
    [r] = runs_of(store, "full")
    assert r.info.status == "FINISHED"
    assert set(RESERVED) <= set(r.data.params)
    p, m = r.data.params, r.data.metrics
    assert (p["problem"], p["n"], p["world_size"], p["scale"]) == ("toy", "100", "1", "local")
    assert p["instance_type"] == "aws-c7i.xlarge" and float(p["price_per_hour"]) > 0
    assert p["price_date"] and "verify" in p["price_source"] and p["instances"] == "3"
    assert int(p["cpu_cores"]) >= 1 and p["cpu_model"]
    assert r.data.tags["scaleout.role"] == "baseline"
    assert m["wall_time"] >= 0.05
    assert m["startup_time"] >= 2.0
    assert m["throughput"] == pytest.approx(1000 / m["wall_time"])
    assert m["cost"] == pytest.approx(float(p["price_per_hour"]) * 3 * m["wall_time"] / 3600)
    files = [a.path for a in mlflow.MlflowClient(tracking_uri=store).list_artifacts(r.info.run_id)]
    assert files == ["w.txt"]


def test_run_that_raises_is_marked_failed_and_the_error_propagates(store):
    with pytest.raises(ZeroDivisionError):
        with track(None, experiment="fails", uri=store, startup_time=0.0):
            1 / 0
    [r] = runs_of(store, "fails")
    assert r.info.status == "FAILED"
    assert "ZeroDivisionError" in r.data.tags["scaleout.error"]
    assert "wall_time" in r.data.metrics


def test_only_rank_zero_logs_and_the_others_get_a_null_run(store):
    def worker(comm):
        with track(comm, experiment="ranks", params={"k": 3}, uri=store, startup_time=0.0) as run:
            run.log_items(5)
            run.log_metric("extra", 1.0)
        return type(run).__name__, run.run_id

    res = cluster.run(worker, 3, backend="sim", timeout=120)
    assert res.values[0][0] == "Run" and res.values[0][1]
    assert res.values[1:] == [("NullRun", None), ("NullRun", None)]
    [r] = runs_of(store, "ranks")
    assert r.data.params["world_size"] == "3" and r.data.params["backend"] == "sim"
    assert r.data.metrics["items"] == 5  # rank 0's own count, not a sum over ranks


def _straggler(comm, uri):
    with track(comm, experiment="makespan", uri=uri, startup_time=0.0):
        time.sleep(1.0 if comm.rank == 1 else 0.0)
    return comm.rank


@pytest.mark.slow
def test_wall_time_of_real_processes_waits_for_the_slowest_rank(store):
    res = cluster.run(_straggler, 2, backend="process", args=(store,), timeout=120, quiet=True)
    assert res.values == [0, 1]
    [r] = runs_of(store, "makespan")
    assert r.data.params["backend"] == "gloo"
    # rank 0 slept 0 s but waited at the exit barrier; the margin covers ranks leaving the entry barrier apart
    assert r.data.metrics["wall_time"] >= 0.5


def test_null_run_has_the_same_methods_as_run():
    public = {n for n in dir(Run) if not n.startswith("_")}
    assert public <= set(dir(NullRun)) | {"client", "params"}


def test_bad_instance_type_and_reserved_params_fail_before_any_run(store, monkeypatch):
    monkeypatch.setenv("SCALEOUT_INSTANCE_TYPE", "no-such-box")
    with pytest.raises(CapstoneError, match="unknown instance type 'no-such-box'.*local-laptop"):
        with track(None, experiment="never", uri=store):
            pass
    monkeypatch.delenv("SCALEOUT_INSTANCE_TYPE")
    with pytest.raises(CapstoneError, match="may not set"):
        with track(None, experiment="never", params={"world_size": 9}, uri=store):
            pass
    assert runs_of(store, "never") == []
