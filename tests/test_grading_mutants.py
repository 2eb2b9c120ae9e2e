"""Every rubric proves it rejects wrong answers: each lab's mutants lose exactly the tests they name,
its reference scores 100 and its blank release 0 (grading/labNN-slug/mutants/)."""
from __future__ import annotations

from pathlib import Path

import pytest

from scaleoutai.grading.labs import find_lab, list_labs
from scaleoutai.grading.mutants import PASTED, grade_mutants, load_mutants

ROOT = Path(__file__).resolve().parents[1]
LABS = list_labs(ROOT)


@pytest.mark.parametrize("lab_name", LABS)
def test_every_lab_ships_mutants_with_labels(lab_name):
    mutants = load_mutants(find_lab(lab_name, ROOT))
    assert len(mutants) >= 4, f"{lab_name} needs at least 4 mutants in grading/{lab_name}/mutants/"


# Labs whose redesign (issue "Labs that assess") is still to come: their answer is the course's code, so
# no pasted-course mutant can lose half the points yet. The list only shrinks.
PASTED_PENDING: set[str] = set()


@pytest.mark.parametrize("lab_name", LABS)
def test_every_redesigned_lab_ships_a_pasted_course_mutant_that_loses_half(lab_name):
    names = {m.name for m in load_mutants(find_lab(lab_name, ROOT))}  # load_mutants checks its says/score lines
    if lab_name in PASTED_PENDING:
        assert PASTED not in names, f"{lab_name} has its {PASTED} mutant: take it off PASTED_PENDING"
    else:
        assert PASTED in names, f"{lab_name} needs grading/{lab_name}/mutants/{PASTED}.py"


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("lab_name", LABS)
def test_each_mutant_loses_exactly_its_tests_reference_100_blank_0(tmp_path, lab_name):
    _, bad = grade_mutants(find_lab(lab_name, ROOT), tmp_path)
    assert not bad, "\n".join(bad)
