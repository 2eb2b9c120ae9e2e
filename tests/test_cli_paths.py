"""Every unusable path is one clear line on stderr and exit status 2, never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

from scaleoutai.cli import main

ROOT = Path(__file__).resolve().parents[1]
BAD = {"a file where a folder is expected": "{file}/sub", "a missing parent": "/proc/no-such-dir/out",
       "an unwritable place": "/proc/sys/out"}
COMMANDS = [["assign", "lab04", "--out", "{bad}"],
            ["grade", "lab04", str(ROOT / "tests" / "grading_helpers.py"), "--out", "{bad}"],
            ["grade", "export-gradescope", "lab04", "--out", "{bad}/a.zip"],
            ["notebooks", "build", "04", "--out", "{bad}"], ["notebooks", "run", "04", "--smoke", "--out", "{bad}"],
            ["release", "course", "--out", "{bad}"], ["release", "solutions", "--chapter", "01", "--out", "{bad}"],
            ["repro", "appendix-a", "--out", "{bad}"]]


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_unusable_output_path_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, kind):
    monkeypatch.chdir(ROOT)
    file = tmp_path / "a-file"
    file.write_text("x")
    bad = BAD[kind].format(file=file)
    code = main([a.format(bad=bad) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("scaleout: error:")
