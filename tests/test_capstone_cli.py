"""`scaleout capstone sweep|report`: argument handling, readable errors, and the template end to end."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaleoutai.cli import build_parser, main
from scaleoutai.capstone import CapstoneError
from scaleoutai.capstone.cli import _split_script_args

TEMPLATE = Path(__file__).resolve().parents[1] / "capstone" / "template"


def parse(*argv):
    return _split_script_args(build_parser().parse_args(["capstone", "sweep", *argv]))


def test_sweep_options_go_before_or_after_the_script_and_script_args_after_the_dashes():
    a = parse("x.py", "--workers", "1,2", "--", "--n", "5", "--workers", "9")
    assert (a.script, a.workers, a.repeats, a.script_args) == ("x.py", "1,2", 1, ["--n", "5", "--workers", "9"])
    a = parse("--repeats", "3", "x.py", "--", "--n", "5")
    assert (a.script, a.workers, a.repeats, a.script_args) == ("x.py", "1,2,4", 3, ["--n", "5"])
    assert parse("x.py").script_args == []


def test_script_arguments_without_dashes_are_a_readable_error():
    with pytest.raises(CapstoneError, match=r"unrecognized sweep arguments \['--n', '3'\].*after --"):
        parse("x.py", "--n", "3")
    with pytest.raises(CapstoneError, match="give the script"):
        parse()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sweep_then_report_on_the_template_produces_the_curves(tmp_path, capsys):
    pytest.importorskip("scaleoutai.cluster.launchers", reason="the launcher (run_script) is not written yet")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    status = main(["capstone", "sweep", str(TEMPLATE / "distributed.py"), "--baseline", str(TEMPLATE / "baseline.py"),
                   "--workers", "1,2", "--experiment", "tmpl", "--tracking-uri", uri, "--timeout", "120",
                   "--no-progress", "--", "--n", "9000", "--steps", "5", "--d", "8"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "matches the baseline" in out and "DIFFERS" not in out
    assert main(["capstone", "report", "--experiment", "tmpl", "--tracking-uri", uri,
                 "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert (tmp_path / "rep" / "report.png").stat().st_size > 10_000
    rows = re.findall(r"\| local/local-laptop \| (baseline|K=1|K=2) \| 1 \| ([\d.e+-]+) \| ([\d.]+) \| ([\d.]+) \|", md)
    assert [r[0] for r in rows] == ["baseline", "K=1", "K=2"]
    t_base, t2, s2, e2 = float(rows[0][1]), float(rows[2][1]), float(rows[2][2]), float(rows[2][3])
    # the table prints 3 decimals: allow the rounding of both times and of S_2 itself
    ratio = t_base / t2
    assert s2 == pytest.approx(ratio, abs=ratio * 5e-4 * (1 / t_base + 1 / t2) + 5e-4)
    assert e2 == pytest.approx(s2 / 2, abs=1e-3)
    capsys.readouterr()
    assert main(["capstone", "report", "--experiment", "nope", "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scaleout: error: no experiment 'nope'") and "available: Default, tmpl" in err
    assert "\n" not in err
