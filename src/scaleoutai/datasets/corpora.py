"""Text corpora, each a pure function of its seed (Appendix D).

    zipf_lines    lines of words whose frequencies follow a Zipf law                  (Ch6, Ch7)
    make_corpus   invented countries' facts in passages, one templated question per fact (Ch25 RAG)

``RELATIONS`` holds the fact and question templates: ``serving.rag``'s extractive reader parses the
same templates, so it imports them from here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def zipf_lines(n_lines: int, words_per_line: int = 10, vocab: int = 1000, seed: int = 0,
               exponent: float = 1.1) -> list[str]:
    """Lines of ``words_per_line`` words "w<i>"; word i is drawn with weight (i + 1)^-exponent.

    Natural text has this heavy head (a few hot keys, Chapter 6's skewed reducers). Line r depends on
    the whole draw, so a rank takes its block of the list, not a regenerated piece.
    """
    if n_lines < 0 or words_per_line < 1 or vocab < 1:
        raise ValueError("need n_lines >= 0, words_per_line >= 1 and vocab >= 1")
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab + 1) ** exponent
    ids = rng.choice(vocab, size=(n_lines, words_per_line), p=weights / weights.sum())
    return [" ".join(f"w{i}" for i in row) for row in ids]


RELATIONS: dict[str, tuple[str, str]] = {  # relation: (fact template, question template)
    "capital": ("The capital of {E} is {A}.", "What is the capital of {E}?"),
    "founded": ("{E} was founded in {A}.", "In which year was {E} founded?"),
    "river": ("The longest river in {E} is the {A}.", "What is the longest river in {E}?"),
    "export": ("The main export of {E} is {A}.", "What is the main export of {E}?"),
    "leader": ("{E} is governed by {A}.", "Who governs {E}?"),
}
_SYLLABLES = ("ka", "lo", "mer", "dan", "vi", "sor", "tu", "bel", "ra", "zen", "qui", "mo", "fal", "ther", "no",
              "gri", "pa", "shu", "el", "dor")
_EXPORTS = ("copper", "tea", "salt", "timber", "wool", "amber", "rice", "glass", "cotton", "silver", "olives", "tin")


@dataclass
class Corpus:
    """Passages, and per question its text, its answer and the index of the passage stating it."""

    passages: list[str]
    questions: list[str]
    answers: list[str]
    gold: list[int]


def _names(rng: np.random.Generator, n: int, parts: int) -> list[str]:
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen["".join(rng.choice(_SYLLABLES, parts)).capitalize()] = None
    return list(seen)


def make_corpus(n_countries: int = 60, facts_per_passage: int = 3, seed: int = 0) -> Corpus:
    """n_countries x 5 facts (one per relation) shuffled into passages, and one question per fact.

    Invented names keep a pretrained encoder from answering from memory: a right answer needs the
    passage that states it (Chapter 25, Section 5).
    """
    if n_countries < 1 or facts_per_passage < 1:
        raise ValueError(f"make_corpus needs n_countries >= 1 and facts_per_passage >= 1, "
                         f"got {n_countries} and {facts_per_passage}")
    rng = np.random.default_rng(seed)
    names = _names(rng, 3 * n_countries, 3)
    countries, cities, people = names[:n_countries], names[n_countries:2 * n_countries], names[2 * n_countries:]
    facts = []  # (sentence, question, answer)
    for i, e in enumerate(countries):
        values = {"capital": cities[i], "founded": str(int(rng.integers(800, 1990))),
                  "river": cities[(i + 1) % n_countries] + " river", "export": str(rng.choice(_EXPORTS)),
                  "leader": "Queen " + people[i] if rng.random() < 0.5 else "King " + people[i]}
        for rel, (fact, question) in RELATIONS.items():
            facts.append((fact.format(E=e, A=values[rel]), question.format(E=e), values[rel]))
    order = rng.permutation(len(facts))
    passages, gold = [], [0] * len(facts)
    for p, s in enumerate(range(0, len(order), facts_per_passage)):
        chunk = order[s:s + facts_per_passage]
        passages.append(" ".join(facts[j][0] for j in chunk))
        for j in chunk:
            gold[j] = p
    return Corpus(passages, [f[1] for f in facts], [f[2] for f in facts], gold)
