"""A student's lab in a real headless browser, then the instructor's batches: open the released lab in
`scaleout lab`, run its cells and read the public checks' summary ("n of m checks passed"), `scaleout validate`
the saved notebook; then `scaleout grade` (the real grader) grades it with two classmates and reruns three
times, adding, removing and renaming a submission: one gradebook row and one feedback page per student."""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from chromium import headless_chromium, needs_chromium
from grading_helpers import gradebook_rows, results
from lab_server import TOKEN, lab_server
from scaleoutai.cli import main
from scaleoutai.grading.labs import BEGIN, END, STUB, assign, find_lab, solution_notebook
from scaleoutai.notebooks.sources import find_repo_root

REPO = find_repo_root(Path(__file__).parent)
LAB = "lab21-asha-scheduler"  # its released cells run to the end: only the checks fail on the stubs
# serial: a browser, JupyterLab and the real grader at once; under the xdist pass's load its kernel missed 150 s
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(420), needs_chromium]


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
        return _wait_for(driver, ".jp-OutputArea-output", "checks passed", timeout=240)[-1].text
    except TimeoutException:
        driver.save_screenshot(str(shot))
        raise


def _saved_outputs(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))


def test_a_student_validates_in_jupyterlab_then_batch_reruns_keep_one_row_and_feedback_page_per_student(
        tmp_path, capsys):
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
    # validate predicted every check passes and the browser showed the blank release pass none of them:
    # the real grader gives her full marks and the blank classmate nothing (the hidden tests are a superset)
    _instructor_grades_the_class_three_times_over(tmp_path, answers, capsys)


ROSTER = ("id,name,email,aliases\n"
          "amy,\"Smith, Amy\",amy@uni.edu,\n"
          "bob,\"Jones, Bob\",bob@uni.edu,\n"
          "carol,\"Lee, Carol\",carol@uni.edu,carol_v2\n"
          "dan,\"Roe, Dan\",dan@uni.edu,\n")
STUBBED = "pasha_search() still raises NotImplementedError: replace the stub with your solution"


def _grade(capsys, subs: Path, out: Path, roster: Path) -> tuple[int, int, str]:
    """The instructor's command (grading/README.md; one job: the least CPU for a few submissions):
    (graded, skipped) from its summary line, and all it printed."""
    capsys.readouterr()
    assert main(["grade", LAB, str(subs), "--out", str(out), "--roster", str(roster), "--quiet"]) == 0
    printed = capsys.readouterr().out
    m = re.search(r"graded (\d+) \(of which 0 failed to run\), skipped (\d+) already graded", printed)
    assert m, printed
    return int(m[1]), int(m[2]), printed


def _one_row_and_one_page_per_student(out: Path, printed: str, graded: dict[str, float]) -> None:
    """gradebook.csv: a row per roster student (``graded`` with their scores, the others missing);
    gradebook.html: one link per graded student; feedback.html beside every results.json with the score."""
    rows = gradebook_rows(out)
    assert sorted(rows) == ["amy", "bob", "carol", "dan"], rows
    assert {k: float(r["score"]) for k, r in rows.items() if k in graded} == graded
    assert all(r["status"] == "ok" for k, r in rows.items() if k in graded)
    assert [k for k, r in rows.items() if r["status"] == "missing"] == sorted(set(rows) - set(graded))
    assert sorted(p.parent.name for p in out.glob("*/results.json")) == sorted(graded)
    assert f"feedback: {len(graded)} feedback.html pages" in printed
    book = (out / "gradebook.html").read_text()
    assert f"<p>{len(graded)} submissions;" in book
    for sid, score in graded.items():
        assert book.count(f'href="{sid}/feedback.html"') == 1, sid
        page = (out / sid / "feedback.html").read_text()
        assert f"feedback for {sid}</h1>" in page and f"<b>Score: {score:g} of 100</b>" in page, sid


def _instructor_grades_the_class_three_times_over(tmp_path: Path, saved: Path, capsys) -> None:
    """The notebook saved in the browser (amy's folder), the reference (bob), the blank release (carol)
    graded by the real batch grader; then three reruns: dan hands in a notebook with one stub left, bob's
    file is removed, carol's is renamed to her roster alias. Only new or changed work is graded again."""
    lab = find_lab(LAB, REPO)
    subs, out, roster = tmp_path / "submissions", tmp_path / "grades", tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    (subs / "amy").mkdir(parents=True)
    shutil.copy(saved, subs / "amy" / saved.name)  # a folder of one student's files: its name is her id
    solution_notebook(lab, subs / "bob.ipynb")
    shutil.copy(assign(lab, tmp_path / "release") / f"{LAB}.ipynb", subs / "carol.ipynb")

    graded, skipped, printed = _grade(capsys, subs, out, roster)
    assert (graded, skipped) == (3, 0)
    assert f"missing (1 in {roster} with no graded submission): dan" in printed.splitlines()
    _one_row_and_one_page_per_student(out, printed, {"amy": 100, "bob": 100, "carol": 0})
    assert "<span class=lost>" not in (out / "amy" / "feedback.html").read_text()  # as validate predicted
    blank = (out / "carol" / "feedback.html").read_text()
    assert blank.count("<span class=lost>failed</span>") == 5  # every test of the rubric, each with its message
    assert "still raises NotImplementedError: replace the stub with your solution" in blank  # what teaches

    # (1) add: dan left pasha_search a stub; the PASHA class he wrote earns its tests' points
    text = lab.source.read_text()
    head, tail = text.split("def pasha_search", 1)
    start, rest = tail.split(BEGIN, 1)
    solution_notebook(lab, subs / "dan.ipynb", f"{head}def pasha_search{start}{STUB}{rest.split(END, 1)[1]}")
    graded, skipped, printed = _grade(capsys, subs, out, roster)
    assert (graded, skipped) == (1, 3) and "missing" not in printed
    _one_row_and_one_page_per_student(out, printed, {"amy": 100, "bob": 100, "carol": 0, "dan": 65})
    lost = [t for t in results(out, "dan")["tests"] if t["score"] < t["max_score"]]
    assert sum(t["max_score"] for t in lost) == 35 and all(STUBBED in t["output"] for t in lost)  # only the stub's
    assert STUBBED in (out / "dan" / "feedback.html").read_text()

    # (2) remove: bob's file is gone from the folder; the work he was graded for keeps its row
    (subs / "bob.ipynb").unlink()
    graded, skipped, printed = _grade(capsys, subs, out, roster)
    assert (graded, skipped) == (0, 3)
    _one_row_and_one_page_per_student(out, printed, {"amy": 100, "bob": 100, "carol": 0, "dan": 65})

    # (3) rename: carol's notebook comes back as carol_v2.ipynb; the roster's alias keeps it hers, ungraded again
    (subs / "carol.ipynb").rename(subs / "carol_v2.ipynb")
    graded, skipped, printed = _grade(capsys, subs, out, roster)
    assert (graded, skipped) == (0, 3) and "unknown" not in printed and "replaced" not in printed
    _one_row_and_one_page_per_student(out, printed, {"amy": 100, "bob": 100, "carol": 0, "dan": 65})
    assert not (out / "carol_v2").exists() and not (out / ".replaced").exists()
    assert gradebook_rows(out)["carol"]["name"] == "Lee, Carol"
    carol = json.loads((out / "carol" / "results.json").read_text())["scaleout"]
    assert Path(carol["source"]).name == "carol_v2.ipynb"  # the same result, now from the renamed file
