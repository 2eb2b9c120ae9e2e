"""scale "torchrun": real torchrun agents with c10d rendezvous on loopback (Appendix B)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaleoutai.cluster.launchers import run_script
from scaleoutai.cluster.launchers.torchrun import torchrun_command

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "allreduce_check.py")


def test_agent_command_uses_c10d_rendezvous_and_configurable_restarts():
    cmd = torchrun_command("s.py", 2, 4, "10.0.0.1:29400", ["--n", "3"], max_restarts=2)
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert {"--nnodes=2", "--nproc-per-node=4", "--rdzv-backend=c10d", "--rdzv-endpoint=10.0.0.1:29400",
            "--max-restarts=2"} <= set(cmd)
    assert cmd[-3:] == ["s.py", "--n", "3"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_torchrun_agents_on_loopback_run_one_script_as_one_world(capsys):
    rc = run_script(EXAMPLE, scale="torchrun", nodes=2, workers=1, script_args=["--length", "37"], timeout=150)
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = re.findall(r"^\[agent (\d)\] rank (\d)/2 .* OK$", out, re.M)
    assert sorted(r for _, r in lines) == ["0", "1"], out
    assert sorted(a for a, _ in lines) == ["0", "1"]  # one rank from each agent


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_failing_rank_under_torchrun_gives_a_nonzero_status(tmp_path, capsys):
    s = tmp_path / "fail.py"
    # one write per line: two ranks printing to the same pipe must not splice their lines
    s.write_text("import os, sys\nsys.stdout.write('rank ' + os.environ['RANK'] + '\\n'); sys.stdout.flush()\n"
                 "sys.exit(3 if os.environ['RANK'] == '1' else 0)\n")
    rc = run_script(str(s), scale="torchrun", workers=2, timeout=150)
    assert rc != 0
    assert "[torchrun] rank 1" in capsys.readouterr().out
