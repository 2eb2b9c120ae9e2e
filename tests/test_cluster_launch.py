"""``cluster.init()`` inside processes started by torchrun, and as a plain script (a world of one)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SCRIPT = textwrap.dedent("""
    import numpy as np, torch, torch.distributed as dist
    from scaleoutai import cluster
    from scaleoutai.collectives import ring_allreduce
    comm = cluster.init()
    x = np.arange(10, dtype=np.float64) * (comm.rank + 1)
    mine = ring_allreduce(comm, x)
    t = torch.from_numpy(x.copy()); dist.all_reduce(t)
    assert np.allclose(mine, t.numpy()), (mine, t)
    print(f"rank {comm.rank}/{comm.size} backend={comm.backend} sum={mine.sum():.1f} agrees-with-torch")
""")


def test_init_under_torchrun_returns_a_working_communicator(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
                          str(script)], capture_output=True, text=True, timeout=150,
                         env={**__import__("os").environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    for r in range(3):
        assert f"rank {r}/3 backend=process sum=270.0 agrees-with-torch" in out.stdout


def test_plain_python_gets_a_world_of_one(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rank 0/1 backend=process sum=45.0 agrees-with-torch" in out.stdout


def test_partial_launcher_environment_is_a_clear_error(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("from scaleoutai import cluster\ncluster.init()\n")
    env = {**__import__("os").environ, "RANK": "0"}
    env.pop("WORLD_SIZE", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode != 0
    assert "set some but not all" in out.stderr
