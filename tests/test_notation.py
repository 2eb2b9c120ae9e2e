"""Notation lint (Appendix C): no chapter or lab uses a book symbol with another meaning, and the lint
catches each way of doing so (P for devices, N for GPUs or players, b for bytes, eta for an efficiency, E
for environment copies, w for an inertia, epsilon for an attack): rule 1, a symbol tied to a noun of its
`not` list; rule 2, a symbol with `context` words in a paragraph that names none of them."""
from __future__ import annotations

from pathlib import Path

import pytest

from scaleoutai.notebooks.notation import lint_source, load_notation

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "chapters" / "notation.yaml"
SOURCES = sorted([*REPO.glob("chapters/*/*.py"), *REPO.glob("labs/*/*.py")])


def test_the_notation_table_holds_appendix_c():
    symbols = {s.name: s for s in load_notation(TABLE)}
    for name in ("K", "N", "P", "b", "B", "\\eta", "\\alpha", "\\beta", "S_p", "E_p", "f", "p"):
        assert name in symbols, f"{name} missing from chapters/notation.yaml"
    assert "parameters" in symbols["P"].meaning and "device" in symbols["P"].never
    assert "batch" in symbols["b"].meaning and "byte" in symbols["b"].never


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_no_symbol_is_used_with_another_meaning(source):
    findings = lint_source(source, load_notation(TABLE))
    assert not findings, "\n".join(findings)


def _lint_prose(tmp_path, prose: str) -> list[str]:
    """The lint's findings on a one-paragraph chapter holding ``prose`` (its 4th line)."""
    path = tmp_path / "chapter.py"
    path.write_text(f"# %% [markdown]\n# # Chapter 99. Test\n#\n# {prose}\n")
    return lint_source(path, load_notation(TABLE))


@pytest.mark.parametrize("prose, flagged", [
    ("Run on $P$ devices with a ring.", True),
    ("A mesh of $P = 8$ GPUs.", True),
    ("Each of the $N$ workers holds a shard.", True),
    ("Spread $N$ GPUs over two nodes.", True),
    ("Let $b$ be the number of bytes per value.", False),
    ("$b$ is the number of bytes per value.", True),
    ("the number of devices $P$ grows", True),
    ("over devices ($P$) and", True),
    ("$\\eta$ denotes the parallel efficiency", True),
    ("the model has $P$ parameters on $K$ devices", False),
    ("a batch of $b$ examples per worker, $B = K b$", False),
    ("with step size $\\eta$ the loss falls", False),
    # the misuses this lint was extended for (Chapters 28, 30, 31 and 35 before the fix) and their repairs
    ("**Normal-form game.** $N$ players (here $N$ counts players, not examples)", True),
    ("Rank 0 hosts the environment and steps $E$ copies of it at once", True),
    ("The inertia weight $w$ (Shi and Eberhart 1998) trades exploration against convergence", True),
    ("the attack scale $\\varepsilon$ grows", True),
    ("send $-\\epsilon$ attackers' vectors", True),
    ("$N$ agents share one reward", True),
    ("**Normal-form game.** $M$ players; $N$ is the dataset size", False),
    ("Rank 0 hosts the environment and steps $M$ copies of it at once", False),
    ("The inertia weight $\\omega$ trades exploration against convergence", False),
    ("with exploration rate $\\epsilon$ decaying from 1", False),
    ("an efficiency $E$ of 0.8 on 8 workers", False),
])
def test_the_lint_flags_a_symbol_defined_as_something_else(tmp_path, prose, flagged):
    findings = _lint_prose(tmp_path, prose)
    assert bool(findings) == flagged, findings
    if flagged:
        assert findings[0].startswith("chapter.py:4: ") and "Appendix C" in findings[0]


@pytest.mark.parametrize("paragraph, flagged", [
    ("IPM sends $-\\varepsilon$ times the honest mean,\n# so the aggregate turns away.", True),
    ("IPM sends $-\\varepsilon$ times the honest mean,\n# which no privacy accountant would call a budget.", False),
    ("Each run spends $\\varepsilon = 1$ at\n# $\\delta = 10^{-5}$.", False),
    ("A ledger first.\n#\n# Then the attack: $\\varepsilon$ times the honest mean.", True),  # the ledger is another paragraph
])
def test_the_lint_flags_epsilon_in_a_paragraph_without_privacy(tmp_path, paragraph, flagged):
    findings = _lint_prose(tmp_path, paragraph)
    assert bool(findings) == flagged, findings
    if flagged:
        assert "names none of" in findings[0] and "\\varepsilon" in findings[0]


def test_every_rule_1_symbol_has_nouns_and_the_reserved_letters_forbid_the_known_misuses():
    symbols = {s.name: s for s in load_notation(TABLE)}
    assert "player" in symbols["N"].never and "inertia" in symbols["w"].never
    assert "environment" in symbols["E"].never and "attack" in symbols["\\varepsilon"].never
    assert "privacy" in symbols["\\varepsilon"].context and "attack" in symbols["\\epsilon"].never


def test_a_malformed_table_is_one_readable_error(tmp_path):
    bad = tmp_path / "notation.yaml"
    bad.write_text("symbols:\n  K: {not: [byte]}\n")
    with pytest.raises(ValueError, match="symbol 'K' needs a 'meaning'"):
        load_notation(bad)
    bad.write_text("symbols:\n  K: {meaning: workers, nto: [byte]}\n")
    with pytest.raises(ValueError, match="symbol 'K' has unknown field"):
        load_notation(bad)
