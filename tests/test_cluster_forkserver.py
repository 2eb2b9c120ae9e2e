"""The warm rank server of the process backend: ranks are forked from it with the driver's present
environment and folder, a dead driver leaves no rank behind, and without the server the ranks start as
fresh interpreters with the same results."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from scaleoutai import cluster
from scaleoutai.cluster import forkserver

pytest.importorskip("torch")


def _where(comm):
    return os.getppid(), os.environ.get("SCALEOUT_PROBE"), os.getcwd(), os.getsid(0) == os.getpid()


def test_ranks_are_forked_from_one_server_with_the_drivers_present_environment_and_folder(tmp_path, monkeypatch):
    cluster.run(_where, 2, backend="process", timeout=120)
    server = forkserver._SERVER[os.getpid()]
    assert server is not None and server.alive
    monkeypatch.setenv("SCALEOUT_PROBE", "set after the server started")
    monkeypatch.chdir(tmp_path)
    values = cluster.run(_where, 3, backend="process", timeout=120).values
    assert [v[0] for v in values] == [server.proc.pid] * 3  # children of the warm server, not fresh interpreters
    assert {v[1] for v in values} == {"set after the server started"}
    assert {v[2] for v in values} == {str(tmp_path)}
    assert all(v[3] for v in values)  # each rank leads its own session: killing its group ends what it started


DRIVER = """
import os, sys, time
from scaleoutai import cluster

def hang(comm, folder):
    open(os.path.join(folder, f"rank{comm.rank}.pid"), "w").write(str(os.getpid()))
    time.sleep(600)

cluster.run(hang, 2, backend="process", args=(sys.argv[1],), timeout=600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split(") ")[-1][0] != "Z"


@pytest.mark.parametrize("server", ["1", "0"])
def test_a_killed_driver_leaves_no_rank_behind(tmp_path, server):
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    env = dict(os.environ, SCALEOUT_FORKSERVER=server, PYTHONPATH=os.pathsep.join(sys.path))
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env)
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("rank*.pid"))) < 2:
        assert time.monotonic() < deadline and driver.poll() is None, "the ranks never started"
        time.sleep(0.1)
    pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid")]
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "ranks outlived their driver"


def test_without_the_server_ranks_start_as_fresh_interpreters_with_the_same_results(tmp_path):
    code = textwrap.dedent("""
        import os, sys
        from scaleoutai import cluster
        from scaleoutai.cluster import forkserver
        res = cluster.run(lambda comm: (os.getppid(), comm.rank * 2), 2, backend="process", timeout=120)
        assert forkserver._SERVER == {}, "the server started although SCALEOUT_FORKSERVER=0"
        assert {v[0] for v in res.values} == {os.getpid()}, "ranks are not the driver's own children"
        print([v[1] for v in res.values])
    """)
    env = dict(os.environ, SCALEOUT_FORKSERVER="0", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[0, 2]"


def test_a_killed_server_fails_the_runs_it_held_and_later_runs_start_without_it():
    cluster.run(_where, 2, backend="process", timeout=120)
    server = forkserver._SERVER[os.getpid()]
    t = threading.Timer(3.0, lambda: os.kill(server.proc.pid, signal.SIGKILL))
    t.start()
    with pytest.raises(cluster.RankError, match="killed by signal 9"):
        cluster.run(lambda comm: time.sleep(60), 2, backend="process", timeout=120)
    t.join()
    values = cluster.run(_where, 2, backend="process", timeout=120).values
    assert {v[0] for v in values} == {os.getpid()}  # fresh interpreters, the driver's children
    forkserver._SERVER.pop(os.getpid(), None)  # the next test of this worker gets a new server
