"""The notebook pipeline: sources -> .ipynb -> papermill (run, or smoke sizes injected for nbval-lax); and `scaleout lab`."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from lab_server import TOKEN, get_json, lab_server
from scaleoutai.cli import main
from scaleoutai.notebooks import (
    PARAMETERS_HEADER,
    NotebookError,
    RunRecord,
    build,
    check_parameters_cell,
    find_repo_root,
    find_sources,
    format_summary,
    has_parameters_cell,
    output_path,
    prepare,
    run,
    smoke_parameters,
)

REPO = find_repo_root(Path(__file__).parent)

GOOD = '''# %% [markdown]
# # A throwaway chapter

# %% tags=["parameters"]
N = 1_000_000  # smoke: 2_000
SHAPE = (4, 4)  # smoke: (2, 3)
OPTIONS = {"mode": "full"}  # smoke: {"mode": "smoke", "workers": None}
SCALE = 1.5  # smoke: -0.25
NAME = "lesson"

# %%
import os, sys
import _helper  # a helper module next to the source: needs cwd / sys.path = the chapter folder

assert isinstance(SHAPE, tuple)
total = sum(range(N))
assert total == N * (N - 1) // 2
print(N, SHAPE, OPTIONS, SCALE, NAME, _helper.X, os.path.basename(os.getcwd()))
print("python:", sys.executable)
'''
NO_PARAMS = '''# %% [markdown]
# # No parameters

# %%
x = 1
'''
RAISES = '''# %% tags=["parameters"]
N = 10  # smoke: 3

# %%
raise ValueError(f"boom at N={N}")
'''
SLEEPS = '''# %% tags=["parameters"]
SECONDS = 60  # smoke: 30

# %%
import time
time.sleep(SECONDS)
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def course(tmp_path: Path) -> Path:
    """A tiny repository: pyproject.toml, four chapters, a helper module, a capstone and some noise."""
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    write(tmp_path / "chapters/01-good/01-good.py", GOOD)
    write(tmp_path / "chapters/01-good/_helper.py", "# %% not a notebook\nX = 42\n")
    write(tmp_path / "chapters/02-no-params/02-no-params.py", NO_PARAMS)
    write(tmp_path / "chapters/03-raises/03-raises.py", RAISES)
    write(tmp_path / "chapters/04-sleeps/04-sleeps.py", SLEEPS)
    write(tmp_path / "chapters/04-sleeps/plain_module.py", "X = 1\n")
    write(tmp_path / "chapters/_build/notebooks/01-good/01-good.py", GOOD)
    write(tmp_path / "chapters/01-good/.ipynb_checkpoints/01-good-checkpoint.py", GOOD)
    write(tmp_path / "capstone/capstone.py", RAISES)
    write(tmp_path / "capstone/template/solution.py", RAISES)  # student code, not a notebook
    return tmp_path


def src(course: Path, name: str) -> Path:
    return next(course.glob(f"chapters/{name}/{name}.py"))


# ---------------------------------------------------------------- finding and parsing sources


def test_find_sources_keeps_percent_files_and_skips_helpers_builds_and_checkpoints(course):
    names = [(p.parent.name, p.stem) for p in find_sources(course)]
    assert names == [("01-good", "01-good"), ("02-no-params", "02-no-params"), ("03-raises", "03-raises"),
                     ("04-sleeps", "04-sleeps"), ("capstone", "capstone")]


def test_find_sources_matches_substring_or_glob_on_folder_or_stem(course):
    assert [p.stem for p in find_sources(course, "03")] == ["03-raises"]
    assert [p.stem for p in find_sources(course, "*sleep*")] == ["04-sleeps"]
    assert [p.stem for p in find_sources(course, "capstone")] == ["capstone"]


def test_a_chapter_may_be_named_by_its_folder_or_source_path(course):
    folder = course / "chapters" / "03-raises"
    assert [p.stem for p in find_sources(course, str(folder))] == ["03-raises"]
    assert [p.stem for p in find_sources(course, str(folder / "03-raises.py"))] == ["03-raises"]
    with pytest.raises(NotebookError, match="is not a chapter folder or notebook source"):
        find_sources(course, str(course))


def test_unknown_pattern_is_an_error_listing_the_names(course):
    with pytest.raises(NotebookError, match=r"no notebook matches '99'; available: 01-good, 02-no-params, 03-raises, 04-sleeps, capstone$"):
        find_sources(course, "99")


def test_smoke_parameters_reads_literal_values_from_trailing_comments(course):
    assert smoke_parameters(src(course, "01-good")) == {
        "N": 2_000, "SHAPE": (2, 3), "OPTIONS": {"mode": "smoke", "workers": None}, "SCALE": -0.25,
    }
    assert smoke_parameters(src(course, "03-raises")) == {"N": 3}


def test_missing_parameters_cell_names_the_file_and_the_header_to_add(course):
    path = src(course, "02-no-params")
    assert not has_parameters_cell(path) and has_parameters_cell(src(course, "01-good"))
    with pytest.raises(NotebookError) as info:
        smoke_parameters(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and PARAMETERS_HEADER in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("line, why", [
    ("N = 5  # smoke 3", "malformed smoke comment"),
    ("N = 5  # smoke:", "malformed smoke comment"),
    ("N = 5  # smoke: range(3)", "is not a Python literal"),
    ("D = {}  # smoke: {1: 2}", "non-string keys"),
    ("print(5)  # smoke: 3", "must follow an assignment"),
    ("A, B = 1, 2  # smoke: (3, 4)", "must follow an assignment"),
])
def test_malformed_smoke_comment_names_file_and_line(tmp_path, line, why):
    path = write(tmp_path / "x.py", f'# %% [markdown]\n# # T\n\n{PARAMETERS_HEADER}\nM = 1  # smoke: 2\n{line}\n')
    with pytest.raises(NotebookError, match=re.escape(f"{path}:6: ") + ".*" + why):
        smoke_parameters(path)


def test_two_parameters_cells_are_an_error(tmp_path):
    path = write(tmp_path / "x.py", f"{PARAMETERS_HEADER}\nN = 1\n\n{PARAMETERS_HEADER}\nM = 2\n")
    with pytest.raises(NotebookError, match="2 cells tagged parameters"):
        check_parameters_cell(path)


# ---------------------------------------------------------------- build


def test_build_writes_ipynb_per_chapter_folder_with_python3_kernel(course, monkeypatch):
    monkeypatch.chdir(course / "chapters")
    written = build(find_sources(course, "01"))
    target = course / "_build/notebooks/01-good/01-good.ipynb"
    assert written == [target]
    nb = nbformat.read(target, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec["name"] == "python3"
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert nb.cells[1].metadata["tags"] == ["parameters"]
    assert [p.name for p in target.parent.iterdir()] == ["01-good.ipynb"]  # no temp file left behind


# ---------------------------------------------------------------- run (papermill)


def executed_text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_run_records_ok_and_failed_and_keeps_going_and_keeps_partial_copies(course, tmp_path):
    out = tmp_path / "executed"
    records = run([src(course, "03-raises"), src(course, "01-good")], smoke=True, timeout=120,
                  out_dir=out, progress=False)
    assert [(r.name, r.status) for r in records] == [("03-raises", "failed"), ("01-good", "ok")]
    failed, ok = records
    assert "ValueError: boom at N=3" in failed.error and "\n" not in failed.error
    assert failed.output == out / "03-raises/03-raises.ipynb" and failed.output.is_file()
    text = executed_text(ok.output)
    # smoke values injected (tuple stays a tuple), helper imported, cwd = the chapter folder
    assert "2000 (2, 3) {'mode': 'smoke', 'workers': None} -0.25 lesson 42 01-good" in text
    assert f"python: {sys.executable}" in text  # the kernel is this environment's python
    assert ok.error == "" and ok.seconds > 0


def test_run_without_smoke_uses_the_lesson_values(course, tmp_path):
    [record] = run([src(course, "03-raises")], smoke=False, out_dir=tmp_path, progress=False)
    assert record.status == "failed" and "boom at N=10" in record.error


def test_notebook_past_its_timeout_is_killed_and_recorded(course, tmp_path):
    start = time.perf_counter()
    [record] = run([src(course, "04-sleeps")], smoke=True, timeout=3, out_dir=tmp_path, progress=False)
    assert time.perf_counter() - start < 15
    assert record.status == "timeout" and "3 s" in record.error
    assert record.output == tmp_path / "04-sleeps" / "04-sleeps.interrupted.ipynb" and record.output.is_file()
    assert not (tmp_path / "04-sleeps" / "04-sleeps.ipynb").exists()  # never a partial at the output path
    assert not list((tmp_path / "04-sleeps").glob(".*running*"))


def test_ctrl_c_leaves_no_partial_notebook_at_the_output_path(course, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "scaleoutai.cli", "notebooks", "run", "04", "--smoke",
                             "--out", str(tmp_path)], cwd=course, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    folder = tmp_path / "04-sleeps"
    deadline = time.monotonic() + 60
    while not list(folder.glob(".*running*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and b"interrupted" in err
    assert (folder / "04-sleeps.interrupted.ipynb").is_file() and not (folder / "04-sleeps.ipynb").exists()


def test_summary_table_lists_each_notebook_and_a_total():
    records = [RunRecord("01-good", Path("a.py"), Path("a.ipynb"), "ok", 1.25),
               RunRecord("03-raises", Path("b.py"), Path("b.ipynb"), "failed", 2.0, "cell 1: ValueError: boom")]
    lines = format_summary(records).splitlines()
    assert lines[0].split() == ["notebook", "status", "seconds", "error"]
    assert lines[2].split() == ["01-good", "ok", "1.2"]
    assert lines[3].split()[:3] == ["03-raises", "failed", "2.0"] and lines[3].endswith("cell 1: ValueError: boom")
    assert lines[-1] == "1/2 ok in 3.2 s"


# ---------------------------------------------------------------- CLI


def test_cli_run_exits_1_when_a_notebook_times_out_and_prints_summary(course, monkeypatch, capsys):
    monkeypatch.chdir(course)
    assert main(["notebooks", "run", "01", "--smoke", "--timeout", "0.5"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^01-good\s+timeout\s", out, re.M) and "0/1 ok" in out
    assert (course / "_build/executed/01-good/01-good.interrupted.ipynb").is_file()
    assert "executed notebooks in" in out


def test_cli_run_exits_0_when_all_pass(course, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(course)
    assert main(["notebooks", "run", "01-good", "--smoke", "--out", str(tmp_path / "o")]) == 0
    assert re.search(r"^01-good\s+ok\s", capsys.readouterr().out, re.M)


@pytest.mark.parametrize("argv, message", [
    (["notebooks", "run", "nope"], "no notebook matches 'nope'; available:"),
    (["notebooks", "build", "*zzz*"], "no notebook matches '*zzz*'"),
    (["notebooks", "run", "02", "--smoke"], "no parameters cell"),
    (["notebooks", "run", "01", "--timeout", "0"], "--timeout must be a positive number"),
])
def test_cli_bad_input_exits_2_with_one_line(course, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(course)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scaleout: error: ") and message in err


def test_cli_build_and_list(course, monkeypatch, capsys):
    monkeypatch.chdir(course)
    assert main(["notebooks", "build", "0[13]-*", "--out", "nb"]) == 0
    assert sorted(p.relative_to(course / "nb").as_posix() for p in (course / "nb").rglob("*.ipynb")) == [
        "01-good/01-good.ipynb", "03-raises/03-raises.ipynb"]
    capsys.readouterr()
    assert main(["notebooks", "list"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["02-no-params", "chapters/02-no-params", "MISSING"] in rows
    assert ["01-good", "chapters/01-good", "yes"] in rows


# ---------------------------------------------------------------- the chapters themselves


def _folder_files(folder: Path) -> set[str]:
    """Files under a chapter folder, without Python's and Jupyter's caches."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and not {"__pycache__", ".ipynb_checkpoints"} & set(p.relative_to(folder).parts)}


ALLOWED_NOISE = Path(__file__).with_name("notebook_noise_allowed.yaml")


def unintended_noise(chapter: str, found: list[list[str]]) -> list[tuple[str, str]]:
    """The stderr lines of a chapter's cells that ``notebook_noise_allowed.yaml`` does not list for it (or for
    every chapter, under ``all``) as intended: (first line of the cell, the line)."""
    import yaml

    listed = yaml.safe_load(ALLOWED_NOISE.read_text()) or {}
    patterns = [re.compile(e["line"]) for key in ("all", chapter) for e in listed.get(key, [])]
    return [(cell, line) for cell, text in found for line in text.splitlines()
            if line.strip() and not any(p.search(line) for p in patterns)]


def check_smoke_and_nbval(source: Path, tmp_path: Path) -> None:
    """Inject the smoke sizes with papermill, then execute and validate the copy with nbval-lax: one run.

    (``scaleout notebooks run`` executes with papermill itself; the tests above check that path.)"""
    check_parameters_cell(source)
    before = _folder_files(source.parent)
    prepared = prepare(source, output_path(source, tmp_path / "prepared"), smoke_parameters(source))
    # nbval starts its kernel beside the notebook; a chapter runs in its own folder (as papermill runs it,
    # and as the check below needs), and PYTHONPATH keeps chapter helper modules importable.
    nb = nbformat.read(prepared, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import os\nos.chdir({str(source.parent)!r})"))
    validated = prepared.with_suffix(".nbval.ipynb")
    nbformat.write(nb, validated)
    noise_file = tmp_path / "noise.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(source.parent), str(Path(__file__).parent),
                                                       os.environ.get("PYTHONPATH", "")]),
               SCALEOUT_NOISE_OUT=str(noise_file))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-p", "nbval_noise",
         str(validated), "-q", "--nbval-cell-timeout=240", "-x"],
        cwd=source.parent, env=env, capture_output=True, text=True, timeout=280,
    )
    tail = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout[-8000:])
    assert proc.returncode == 0, f"{source.stem}: failed under nbval-lax at smoke size:\n{tail}\n{proc.stderr[-2000:]}"
    assert re.search(r"\d+ passed", proc.stdout)
    noise = unintended_noise(source.parent.name, json.loads(noise_file.read_text()))
    assert not noise, (f"{source.stem}: {len(noise)} line(s) of library noise in the cells' stderr (configure the "
                       f"library's logging or capture it; or list an intended line in {ALLOWED_NOISE.name}):\n"
                       + "\n".join(f"  [{cell}] {line}" for cell, line in noise[:12]))
    # The instructor edition: every chapter also gives a reveal.js deck (issue 21); tests/test_slides.py
    # renders an executed one, with its figures.
    from scaleoutai.notebooks.slides import render_deck

    deck = render_deck(prepared, tmp_path / "slides")
    assert deck.is_file() and "<section" in deck.read_text()
    # Opening a chapter never writes into the course: its MLflow stores, shards and checkpoints go to temp folders.
    written = sorted(_folder_files(source.parent) - before)
    assert not written, f"{source.name} wrote into its chapter folder: {written[:5]}; write under tempfile.mkdtemp()"


@pytest.mark.notebooks
@pytest.mark.timeout(300)
def test_smoke_check_passes_for_a_throwaway_chapter_and_catches_a_broken_one(course, tmp_path):
    check_smoke_and_nbval(src(course, "01-good"), tmp_path)
    with pytest.raises(AssertionError, match=r"03-raises: failed under nbval-lax at smoke size") as info:
        check_smoke_and_nbval(src(course, "03-raises"), tmp_path)
    # the smoke size reached the cell (N=3), and the student sees the traceback with the failing line
    assert "ValueError: boom at N=3" in str(info.value) and 'raise ValueError(f"boom at N={N}")' in str(info.value)


@pytest.mark.notebooks
@pytest.mark.timeout(300)
def test_a_chapter_that_writes_into_its_own_folder_fails_the_smoke_check(course, tmp_path):
    source = write(course / "chapters/05-writes/05-writes.py",
                   '# %% [markdown]\n# # Writes\n\n# %% tags=["parameters"]\nN = 2  # smoke: 1\n\n# %%\nopen("mlflow.db", "w").write("x")\n')
    with pytest.raises(AssertionError, match=r"05-writes.py wrote into its chapter folder: \['mlflow.db'\]"):
        check_smoke_and_nbval(source, tmp_path)


CHAPTER_SOURCES = find_sources(REPO)


@pytest.mark.notebooks
@pytest.mark.timeout(300)
@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=[p.stem for p in CHAPTER_SOURCES])
def test_chapter_runs_at_smoke_size_and_passes_nbval(source, tmp_path):
    check_smoke_and_nbval(source, tmp_path)


def test_every_chapter_source_has_a_parameters_cell():
    problems = []
    for source in CHAPTER_SOURCES:
        try:
            smoke_parameters(source)
        except NotebookError as exc:
            problems.append(str(exc))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- scaleout lab


def put_json(url: str, token: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="PUT",
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.load(response)


def test_workspace_rebuild_replaces_untouched_copies_and_keeps_edited_ones(course, tmp_path):
    from scaleoutai.notebooks.workspace import build_workspace

    ws = tmp_path / "ws"
    first = build_workspace(course, ws)
    assert "chapters/01-good/01-good.ipynb" in first.written and "index.ipynb" in first.written
    assert "chapters/01-good/_helper.py" in first.written  # what a chapter imports from its folder
    index = (ws / "index.ipynb").read_text()
    assert "01-good" in index and "Part II: Distributed data processing" in index and "(coming)" in index
    edited, untouched = ws / "chapters/01-good/01-good.ipynb", ws / "chapters/03-raises/03-raises.ipynb"
    nb = json.loads(edited.read_text())
    nb["cells"][0]["source"] = "my own words"
    edited.write_text(json.dumps(nb))
    mine = edited.read_text()
    for name in ("01-good", "03-raises"):  # a course update changes both sources
        source = course / "chapters" / name / f"{name}.py"
        source.write_text(source.read_text() + "\n# %%\nprint('updated')\n")
    again = build_workspace(course, ws)
    assert edited.read_text() == mine and "print('updated')" in (ws / "chapters/01-good/01-good.updated.ipynb").read_text()
    assert "print('updated')" in untouched.read_text() and again.kept == ["chapters/01-good/01-good.ipynb"]
    assert build_workspace(course, ws).written == []  # nothing new: nothing rewritten
    opened = ws / "chapters/03-raises/03-raises.ipynb"  # opened and run in JupyterLab, not edited
    nb = json.loads(opened.read_text())
    nb["metadata"]["kernelspec"]["display_name"] = "Python 3"
    nb["cells"][-1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran"}]
    opened.write_text(json.dumps(nb))
    source = course / "chapters" / "03-raises" / "03-raises.py"
    source.write_text(source.read_text() + "\n# %%\nprint('again')\n")
    assert "chapters/03-raises/03-raises.ipynb" in build_workspace(course, ws).written  # an update replaces it


@pytest.mark.timeout(180)
def test_lab_lands_on_the_index_and_saving_a_chapter_leaves_the_course_untouched(tmp_path):
    ws = tmp_path / "workspace"
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    with lab_server(REPO, tmp_path, ws) as (base, _):
        assert get_json(f"{base}/api/contents/index.ipynb", TOKEN)["type"] == "notebook"
        path = "chapters/04-communication-primitives/04-communication-primitives.ipynb"
        model = get_json(f"{base}/api/contents/{path}", TOKEN)
        assert model["type"] == "notebook" and {"markdown", "code"} <= {c["cell_type"] for c in model["content"]["cells"]}
        model["content"]["cells"][0]["source"] = "my notes on chapter 4"
        put_json(f"{base}/api/contents/{path}", TOKEN, {"type": "notebook", "format": "json",
                                                        "content": model["content"]})
        assert "my notes on chapter 4" in (ws / path).read_text()
        lab_stub = get_json(f"{base}/api/contents/labs/lab04-ring-allreduce/lab04-ring-allreduce.ipynb", TOKEN)
        assert "NotImplementedError" in json.dumps(lab_stub["content"])
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before, f"scaleout lab changed the course:\n{after}"
    assert "workspace" in (tmp_path / "lab.log").read_text() and "ready in" in (tmp_path / "lab.log").read_text()


def test_the_noise_plugin_keeps_stderr_and_library_widgets_and_the_list_excuses_only_what_it_names(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import warnings\nwarnings.warn('a library speaks')"),
                nbformat.v4.new_code_cell("import os\nos.write(2, b'from C\\n')"),
                nbformat.v4.new_code_cell("import time\ntime.sleep(1)\nprint('a result')")]
    path = tmp_path / "noisy.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "noise.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
               SCALEOUT_NOISE_OUT=str(out))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-p", "nbval_noise",
                           str(path), "-q"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    found = json.loads(out.read_text())
    lines = [line for cell, line in unintended_noise("00-nothing-listed", found)]
    assert any("UserWarning: a library speaks" in line for line in lines) and "from C" in lines, lines
    assert not any("a result" in line for line in lines)
    listed = [("x", "scaleout run: rank 0 exited with status 1; stopped the others"), ("x", "from C")]
    assert unintended_noise("41-capstone", [[c, t] for c, t in listed]) == [("x", "from C")]
