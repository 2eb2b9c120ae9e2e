"""A student's lab in a real headless browser: open the released lab in `scaleout lab`, run its cells and
read the public checks' summary ("n of m checks passed"), then `scaleout validate` the saved notebook."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from chromium import headless_chromium, needs_chromium
from lab_server import TOKEN, lab_server
from scaleoutai.cli import main
from scaleoutai.grading.labs import find_lab, solution_notebook
from scaleoutai.notebooks.sources import find_repo_root

REPO = find_repo_root(Path(__file__).parent)
LAB = "lab21-asha-scheduler"  # its released cells run to the end: only the checks fail on the stubs
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), needs_chromium]


def _wait_for(driver, css: str, text: str | None = None, timeout: float = 90):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d):
        hits = d.find_elements(By.CSS_SELECTOR, css)
        return [h for h in hits if text is None or text in h.text] or False

    return WebDriverWait(driver, timeout, poll_frequency=0.3).until(found)


def _command(driver, menu: str, command: str) -> None:
    """Click a JupyterLab menu and one of its commands (the same clicks a student makes)."""
    _wait_for(driver, ".lm-MenuBar-item", menu)[0].click()
    _wait_for(driver, f'.lm-Menu-item[data-command="{command}"]')[0].click()


def _run_all_and_read_summary(driver, base: str, rel: str, shot: Path) -> str:
    """Open ``rel``, Run All Cells, return the public checks' output (a screenshot at ``shot`` if it never comes)."""
    driver.get(f"{base}/lab/tree/{rel}?token={TOKEN}")
    _wait_for(driver, ".jp-Notebook .jp-CodeCell")
    _wait_for(driver, ".jp-StatusBar-TextItem", "| Idle")  # the kernel is started and connected
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    for attempt in range(3):  # a click in the instant the kernel connects can be lost: click again if nothing runs
        _command(driver, "Run", "runmenu:run-all")
        try:
            WebDriverWait(driver, 20, poll_frequency=0.3).until(lambda d: any(  # a cell queued, running or run
                re.search(r"\[(\*|\d+)\]", p.text) for p in d.find_elements(By.CSS_SELECTOR, ".jp-InputPrompt")))
            break
        except TimeoutException:
            assert attempt < 2, "Run All Cells never started the cells"
    try:
        return _wait_for(driver, ".jp-OutputArea-output", "checks passed", timeout=150)[-1].text
    except TimeoutException:
        driver.save_screenshot(str(shot))
        raise


def _saved_outputs(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))


def test_a_student_runs_the_checks_in_jupyterlab_sees_the_summary_then_validates(tmp_path, capsys):
    ws = tmp_path / "workspace"
    # JupyterLab renders only the cells in view; the test reads the last cell's output without scrolling
    settings = tmp_path / "jupyter-config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    with lab_server(REPO, tmp_path, ws) as (base, _), headless_chromium(tmp_path / "chromium-profile") as driver:
        released = ws / "labs" / LAB / f"{LAB}.ipynb"
        summary = _run_all_and_read_summary(driver, base, f"labs/{LAB}/{LAB}.ipynb", tmp_path / "blank.png")
        assert summary.splitlines()[0] == "0 of 4 checks passed", summary
        assert "FAILED top_grows_on_disagreement: NotImplementedError" in summary

        # the student writes the answers (here: the reference solution) in a notebook beside the release
        answers = released.with_name("my-answers.ipynb")
        nb = json.loads(solution_notebook(find_lab(LAB, REPO), answers).read_text())
        nb["metadata"]["kernelspec"] = json.loads(released.read_text())["metadata"]["kernelspec"]
        answers.write_text(json.dumps(nb))
        summary = _run_all_and_read_summary(driver, base, f"labs/{LAB}/my-answers.ipynb", tmp_path / "answers.png")
        assert summary.splitlines()[0] == "4 of 4 checks passed" and "FAILED" not in summary, summary
        _command(driver, "File", "docmanager:save")
        deadline = time.monotonic() + 30
        while "4 of 4 checks passed" not in _saved_outputs(answers):
            assert time.monotonic() < deadline, "JupyterLab did not save the notebook"
            time.sleep(0.3)

    capsys.readouterr()
    assert main(["validate", LAB, str(answers)]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 checks passed" in out and "ready to hand in" in out
