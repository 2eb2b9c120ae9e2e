"""scale "local" of run_script: K real processes, env wiring, fail fast, timeout, bad input (Appendix B)."""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from scaleoutai.cli import UserError
from scaleoutai.cluster.launchers import run_script

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "allreduce_check.py")


def _script(tmp_path: Path, body: str) -> str:
    p = tmp_path / "s.py"
    p.write_text(body)
    return str(p)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_local_ring_allreduce_matches_torch_on_every_rank_for_uneven_chunks(capsys):
    rc = run_script(EXAMPLE, workers=3, script_args=["--length", "101", "--dtype", "float32"], timeout=100)
    out = capsys.readouterr().out
    assert rc == 0, out
    ranks = sorted(int(m) for m in re.findall(r"^\[rank (\d)\] rank \1/3 .* OK$", out, re.M))
    assert ranks == [0, 1, 2], out


@pytest.mark.timeout(60)
def test_local_sets_rank_variables_env_and_argv_for_each_rank(tmp_path, capsys):
    s = _script(tmp_path, "import os, sys\nprint(os.environ['RANK'], os.environ['LOCAL_RANK'], "
                          "os.environ['WORLD_SIZE'], os.environ['MASTER_ADDR'], os.environ['FOO'], sys.argv[1:])\n")
    assert run_script(s, workers=2, script_args=["a", "--b"], env={"FOO": "bar baz"}, timeout=50) == 0
    out = capsys.readouterr().out
    for r in (0, 1):
        assert f"[rank {r}] {r} {r} 2 127.0.0.1 bar baz ['a', '--b']" in out


@pytest.mark.timeout(60)
def test_first_failing_rank_ends_the_group_and_its_status_is_returned(tmp_path, capsys):
    s = _script(tmp_path, "import os, sys, time\nif os.environ['RANK'] == '1':\n    sys.exit(3)\ntime.sleep(60)\n")
    t0 = time.monotonic()
    assert run_script(s, workers=3, timeout=50) == 3
    assert time.monotonic() - t0 < 30  # ranks 0 and 2 were killed, not waited for
    assert "rank 1 exited with status 3" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_timeout_kills_every_rank_and_returns_124(tmp_path, capsys):
    s = _script(tmp_path, "import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    t0 = time.monotonic()
    assert run_script(s, workers=2, timeout=1.5) == 124
    assert time.monotonic() - t0 < 20
    assert "timed out after 1.5 s" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, words", [
    ({"scale": "mpi"}, "unknown scale"), ({"workers": 0}, "workers must be"), ({"nodes": 2}, "--scale torchrun"),
    ({"timeout": -1}, "timeout must be"), ({"gpus_per_node": -1}, "gpus_per_node"),
])
def test_bad_arguments_raise_one_readable_line(tmp_path, kwargs, words):
    with pytest.raises(UserError, match=re.escape(words)):
        run_script(_script(tmp_path, "pass\n"), **kwargs)


def test_missing_script_is_reported_by_name():
    with pytest.raises(UserError, match="no script at 'nope.py'"):
        run_script("nope.py")


@pytest.mark.parametrize("scale, words", [("local", "WORLD_SIZE=4"), ("torchrun", "--rdzv-backend=c10d"),
                                          ("ray", "num_workers=4")])
def test_dry_run_prints_the_command_and_starts_nothing(tmp_path, capsys, scale, words):
    s = _script(tmp_path, "raise SystemExit(9)\n")
    assert run_script(s, scale=scale, workers=4, dry_run=True, script_args=["--x"]) == 0
    out = capsys.readouterr().out
    assert words in out and "--x" in out
    assert sys.executable in out or scale != "local"
