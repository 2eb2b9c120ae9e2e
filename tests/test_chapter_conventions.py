"""Every chapter follows the conventions of CHAPTERS.md: prerequisites, sections 1-9 and What's next,
Section 4 shows its code, research directions cite without links, no swallowed production failures,
no typed prices, no control characters in markdown. And the checker itself catches each breach."""
from __future__ import annotations

from pathlib import Path

import pytest

from scaleoutai.notebooks.conventions import check_chapter

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in (REPO / "chapters").glob("*/*.py") if not p.name.startswith("_"))

GOOD = '''# %% [markdown]
# # Chapter 99. A conforming chapter
#
# **Prerequisites:** Chapter 4 (collectives).

# %% tags=["parameters"]
K = 4  # smoke: 2

# %% [markdown]
# ## 1. Motivation
# ## 2. Core concepts
# ## 3. The pattern
# ## 4. From scratch

# %%
from scaleoutai import collectives
from scaleoutai.notebooks import show
show(collectives.ring_allreduce)

# %% [markdown]
# ## 5. Production
# ## 6. Failure modes
# ## 7. Evaluation
# ## 8. Exercises
#
# ## 9. Research directions
#
# - **Open problem one.** Why it is open.
#   - Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH",
#     IJHPCA, 2005. The cost models.
# - **Open problem two.** Why it is open.
#   - Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC, 2009.
#
# ## What's next
#
# Chapter 15 builds data parallelism on the ring all-reduce.
'''


@pytest.mark.parametrize("source", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_follows_the_conventions(source):
    problems = check_chapter(source)
    assert not problems, "\n".join(problems)


def test_every_existing_chapter_folder_is_checked():
    assert len(CHAPTERS) >= 14


def _write(tmp_path, text):
    path = tmp_path / "99-chapter.py"
    path.write_text(text)
    return path


def test_a_conforming_chapter_passes(tmp_path):
    assert check_chapter(_write(tmp_path, GOOD)) == []


@pytest.mark.parametrize("old, new, message", [
    ("# **Prerequisites:** Chapter 4 (collectives).\n", "", "Prerequisites"),
    ("# ## 9. Research directions", "# ## 9. Further reading", "9. Research directions"),
    ("# ## What's next", "# ## Summary", "What's next"),
    ("show(collectives.ring_allreduce)", "collectives.ring_allreduce", "show(fn)"),
    ("IJHPCA, 2005.", "https://example.org/paper", "no links"),
    ("# ## 3. The pattern\n", "", "numbered 1. to 9."),
    ("Why it is open.\n#   - Thakur", "Why\tit is open.\n#   - Thakur", "control character"),
    ("Chapter 15 builds", "The next part builds", "must name the chapter"),
    ("# ## 8. Exercises", "# ## 8. Exercises\n#\n# A GPU costs $2.50 per GPU-hour.", "price typed in prose"),
    ("show(collectives.ring_allreduce)", "show(collectives.ring_allreduce)\nprice = 2.0", "price typed in code"),
    ("show(collectives.ring_allreduce)",
     "show(collectives.ring_allreduce)\ntry:\n    import ray\nexcept ImportError:\n    print('no ray')",
     "only prints or passes"),
])
def test_each_breach_is_reported_with_its_fix(tmp_path, old, new, message):
    assert old in GOOD
    problems = check_chapter(_write(tmp_path, GOOD.replace(old, new)))
    assert any(message in p for p in problems), problems


def test_an_expected_failure_demo_is_not_a_swallowed_failure(tmp_path):
    demo = ("show(collectives.ring_allreduce)\ntry:\n    run()\n    raise AssertionError('must fail')\n"
            "except cluster.DeadlockError as exc:\n    print('detected', exc)")
    assert check_chapter(_write(tmp_path, GOOD.replace("show(collectives.ring_allreduce)", demo))) == []


def test_cli_check_passes_on_the_course_and_fails_with_one_line_per_finding(capsys, tmp_path, monkeypatch):
    from scaleoutai.cli import main

    assert main(["notebooks", "check"]) == 0
    assert "all follow the conventions" in capsys.readouterr().out
    course = tmp_path / "course"
    (course / "chapters" / "99-chapter").mkdir(parents=True)
    (course / "pyproject.toml").write_text("")
    (course / "chapters" / "notation.yaml").write_text((REPO / "chapters" / "notation.yaml").read_text())
    (course / "chapters" / "99-chapter" / "99-chapter.py").write_text(GOOD.replace("# ## What's next", "# ## Summary"))
    monkeypatch.chdir(course)
    assert main(["notebooks", "check"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("99-chapter.py:") and "What's next" in out[0] and out[-1].endswith("1 finding(s)")
