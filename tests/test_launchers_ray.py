"""scale "ray": the script inside Ray Train's TorchTrainer with 2 CPU workers (Appendix B)."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("ray.train", reason="Ray Train not installed: pip install -e '.[scale]'")

from scaleoutai.cluster.launchers import run_script  # noqa: E402

# cluster.init() must find Ray's process group; env and argv must reach every rank; a non-zero exit of
# any rank must become the run's status.
SCRIPT = """
import os, sys
import numpy as np
import torch, torch.distributed as dist
from scaleoutai import cluster

comm = cluster.init(timeout=120)
t = torch.tensor([float(comm.rank + 1)])
dist.all_reduce(t)
peer = (comm.rank + 1) % comm.size
comm.send(np.arange(3) + comm.rank, peer)
got = comm.recv((comm.rank - 1) % comm.size)
print(f"rank {comm.rank}/{comm.size} sum={t.item():g} got={got.tolist()} "
      f"probe={os.environ.get('SCALEOUT_PROBE')} argv={sys.argv[1:]}", flush=True)
dist.barrier()
sys.exit(int(sys.argv[1]) if comm.rank == 1 else 0)
"""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ray_train_runs_the_script_on_two_cpu_workers_in_one_process_group(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    script = tmp_path / "ray_probe.py"
    script.write_text(SCRIPT)
    rc = run_script(str(script), scale="ray", workers=2, script_args=["0"], env={"SCALEOUT_PROBE": "x y"},
                    timeout=360)
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = re.findall(r"^\[rank (\d)\] rank \1/2 sum=3 got=\[(.*)\] probe=x y argv=\['0'\]$", out, re.M)
    assert sorted(lines) == [("0", "1, 2, 3"), ("1", "0, 1, 2")], out  # each rank exactly once
