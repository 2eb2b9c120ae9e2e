"""``scaleout run``: options, "-- ARGS" for the script, exit status and readable errors (Appendix B)."""
from __future__ import annotations

from pathlib import Path

import pytest

from scaleoutai.cli import main


def _script(tmp_path: Path, body: str) -> str:
    p = tmp_path / "s.py"
    p.write_text(body)
    return str(p)


def test_arguments_after_double_dash_go_to_the_script(tmp_path, capsys):
    s = _script(tmp_path, "pass\n")
    assert main(["run", s, "--scale", "torchrun", "--nodes", "2", "--workers", "1", "--max-restarts", "2",
                 "--dry-run", "--", "--n", "5"]) == 0
    out = capsys.readouterr().out
    assert "--nnodes=2 --nproc-per-node=1" in out and "--max-restarts=2" in out and out.rstrip().endswith("--n 5")


def test_options_before_the_script_work_too(tmp_path, capsys):
    s = _script(tmp_path, "pass\n")
    assert main(["run", "--scale", "slurm", "--nodes", "3", "--dry-run", s]) == 0
    assert "#SBATCH --nodes=3" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_the_scripts_exit_status_is_the_commands_and_env_reaches_it(tmp_path, capsys):
    s = _script(tmp_path, "import os, sys\nprint(os.environ['X'])\nsys.exit(int(sys.argv[1]))\n")
    assert main(["run", s, "--workers", "1", "--env", "X=hello", "--timeout", "50", "--", "4"]) == 4
    assert "[rank 0] hello" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["run"], "give the script"), (["run", "{s}", "--length", "3"], "arguments for the script go after --"),
    (["run", "{s}", "--env", "NOVALUE"], "NAME=VALUE"), (["run", "missing.py"], "no script at"),
])
def test_bad_command_lines_exit_2_with_one_line(tmp_path, capsys, argv, words):
    s = _script(tmp_path, "pass\n")
    assert main([a.replace("{s}", s) for a in argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
