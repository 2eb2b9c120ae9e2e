"""Chapter 18 fault drill: torchrun restarts a group after an injected crash and training resumes exactly."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "fault_drill.py"
sys.path.insert(0, str(REPO / "examples"))
import fault_drill  # noqa: E402

ARGS = ["--steps", "12", "--every", "4", "--batch", "15"]  # 15 rows: uneven shards on 2 ranks
EVENT = re.compile(r"^drill rank=(\d+) attempt=(\d+) event=(\w+) step=(\d+) t=([\d.]+)", re.M)


def env() -> dict[str, str]:
    # Without TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 the restarted group can read the previous group's gloo
    # addresses from the shared rendezvous store and fail (a race) with "connectFullMesh ... Connection refused".
    return {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def torchrun(tmp: Path, name: str, crash: bool) -> tuple[dict[str, np.ndarray], list[tuple[int, ...]], str]:
    out, ckpt = tmp / f"{name}.npz", tmp / f"{name}-ckpt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=1",
           str(SCRIPT), "--ckpt-dir", str(ckpt), "--out", str(out), *ARGS]
    if crash:
        cmd += ["--crash-marker", str(tmp / f"{name}.crashed")]
    proc = subprocess.run(cmd, env=env(), cwd=tmp, capture_output=True, text=True, timeout=110)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    with np.load(out) as z:
        final = {k: z[k] for k in z.files}
    events = [(int(r), int(a), e, int(s)) for r, a, e, s, _ in EVENT.findall(proc.stdout)]
    return final, events, log


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_crash_restart_resume_equals_uninterrupted_run(tmp_path):
    got, events, log = torchrun(tmp_path, "crash", crash=True)
    crashes = [e for e in events if e[2] == "crash"]
    assert crashes == [(1, 0, "crash", 6)], log[-4000:]
    resumes = sorted((a, r, s) for r, a, e, s in events if e == "resume")
    assert resumes == [(0, 0, 0), (0, 1, 0), (1, 0, 4), (1, 1, 4)], log[-4000:]  # attempt 1 resumed from step 4
    assert max(a for _, a, _, _ in events) == 1  # exactly one restart
    assert int(got["attempt"]) == 1 and int(got["resumed_from"]) == 4

    ref, ref_events, _ = torchrun(tmp_path, "clean", crash=False)
    assert {e[1] for e in ref_events} == {0} and int(ref["resumed_from"]) == 0
    keys = sorted(k for k in ref if k.startswith(("W", "b")))
    assert keys == ["W0", "W1", "b0", "b1"]
    for k in keys:
        assert got[k].dtype == np.float64
        np.testing.assert_array_equal(got[k], ref[k])  # same K, same order of sums: bit for bit
    single = fault_drill.reference(12, 15, [8, 16, 1], 0, 0.01)
    for k in keys:
        np.testing.assert_allclose(got[k], single[k], rtol=1e-12, atol=1e-12)


def test_drill_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        fault_drill.parse(["--ckpt-dir", "x", "--out", "y", "--every", "0"])
    assert exc.value.code == 2
    assert "--every" in capsys.readouterr().err


def test_batches_depend_only_on_seed_and_step():
    a = fault_drill.make_batches(5, 7, [3, 4, 2], seed=1)
    b = fault_drill.make_batches(3, 7, [3, 4, 2], seed=1)
    for (xa, ya), (xb, yb) in zip(a, b):  # replaying step s after a restart sees the same rows
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert a[0][0].shape == (7, 3) and a[0][1].shape == (7, 2)
