"""A web-like text corpus with planted duplicates, boilerplate and grounded questions (Chapter 36, Appendix D).

``web_corpus(n_docs, seed=...)`` is a pure function of its arguments. Each document is a page of lines:
a site header (boilerplate shared by every page of its site, and a cookie banner on many sites), a
title, body paragraphs, a site footer. Bodies mix filler sentences drawn from a topic (topics follow a
power law, p_t proportional to (t + 1)^-zipf, words within a topic too) with facts about invented
countries, written with the fact templates of ``serving.rag`` so that its extractive reader answers the
questions. Every fact is stated in exactly one original page (its ``gold``).

A share ``dup_rate`` of the pages are copies of an original, of three kinds:

- ``exact``: the same body, under the same or another site's boilerplate (identical once cleaned);
- ``near``: the body with word edits (substitute, delete, insert) at a rate drawn per copy from
  [0, max_edit], never inside a fact sentence;
- ``shingled``: a contiguous window of 60-95% of the body's sentences plus one new sentence, the way
  an excerpt is republished.

Ids are crawl order: pages are shuffled, but every copy comes after its original, so keeping the
smallest id of a duplicate cluster keeps the original. Imports nothing of ours but ``errors``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

__all__ = ["WebCorpus", "web_corpus", "FACT_TEMPLATES"]

FACT_TEMPLATES: dict[str, tuple[str, str]] = {  # relation: (fact, question); the templates of serving.rag
    "capital": ("The capital of {E} is {A}.", "What is the capital of {E}?"),
    "founded": ("{E} was founded in {A}.", "In which year was {E} founded?"),
    "river": ("The longest river in {E} is the {A}.", "What is the longest river in {E}?"),
    "export": ("The main export of {E} is {A}.", "What is the main export of {E}?"),
    "leader": ("{E} is governed by {A}.", "Who governs {E}?"),
}
_SYL = ("ka", "lo", "mer", "dan", "vi", "sor", "tu", "bel", "ra", "zen", "qui", "mo", "fal", "ther", "no", "gri",
        "pa", "shu", "el", "dor", "ven", "ith", "ul", "bra", "cos", "mi", "tar", "od")
_COMMON = ("the", "of", "and", "in", "to", "a", "with", "for", "on", "is", "that", "by", "as", "from", "was", "its")
_EXPORTS = ("copper", "tea", "salt", "timber", "wool", "amber", "rice", "glass", "cotton", "silver", "olives", "tin")
_SITES = ("Daily", "Wiki", "Travel", "Atlas", "Gazette", "Forum", "Review", "Journal", "Digest", "Herald")
_COOKIE = "We use cookies to improve your experience. Accept all cookies"


@dataclass
class WebCorpus:
    """Pages and what was planted in them.

    ``source[i]`` is -1 for an original, else the id of the original page i copies; ``kind[i]`` is
    "original", "exact", "near" or "shingled"; ``edit_rate[i]`` the share of body words edited (near
    copies); questions, answers and ``gold`` (the original page stating the answer) per fact."""

    docs: list[str]
    source: np.ndarray
    kind: list[str]
    topic: np.ndarray
    site: np.ndarray
    edit_rate: np.ndarray
    questions: list[str]
    answers: list[str]
    gold: np.ndarray
    boilerplate: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.docs)

    def family(self) -> np.ndarray:
        """The original of every page (itself for an original): planted duplicate clusters."""
        return np.where(self.source >= 0, self.source, np.arange(len(self.docs)))

    def planted_pairs(self) -> set[tuple[int, int]]:
        """Every pair (i < j) of pages in the same planted family."""
        groups: dict[int, list[int]] = {}
        for i, f in enumerate(self.family()):
            groups.setdefault(int(f), []).append(i)
        return {(a, b) for ids in groups.values() for a, b in combinations(sorted(ids), 2)}


def _check(name: str, value: float, lo: float, hi: float, integer: bool = False) -> None:
    if (integer and int(value) != value) or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"web_corpus: {name} must be {kind} in [{lo}, {hi}], got {value!r}")


def _words(rng: np.random.Generator, n: int, parts: tuple[int, int], taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        w = "".join(rng.choice(_SYL, int(rng.integers(parts[0], parts[1] + 1))))
        if w not in taken and len(w) > 3:
            taken.add(w)
            out.append(w)
    return out


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def _filler(rng: np.random.Generator, vocab: list[str], cdf: np.ndarray) -> str:
    n = int(rng.integers(7, 14))
    u = rng.random((3, n))  # common word?, which topic word (inverse CDF), which common word
    common, pick, which = u[0] < 0.35, np.minimum(np.searchsorted(cdf, u[1]), len(vocab) - 1), (u[2] * len(_COMMON)).astype(int)
    words = [_COMMON[w] if c else vocab[v] for c, v, w in zip(common, pick, which)]
    return " ".join(words).capitalize() + "."


def _edit(rng: np.random.Generator, sentence: str, rate: float, vocab: list[str]) -> str:
    out = []
    for w in sentence.rstrip(".").split():
        u = rng.random()
        if u < rate / 3:
            out.append(vocab[int(rng.integers(len(vocab)))])  # substitute
        elif u < 2 * rate / 3:
            continue  # delete
        else:
            out.append(w)
            if u < rate:
                out.append(str(rng.choice(_COMMON)))  # insert after
    return (" ".join(out) or vocab[0]).capitalize() + "."


def _paragraphs(sentences: list[str], cuts: list[int]) -> list[str]:
    return [" ".join(sentences[a:b]) for a, b in zip([0] + cuts, cuts + [len(sentences)]) if b > a]


def web_corpus(n_docs: int = 500, dup_rate: float = 0.3, topics: int = 12, zipf: float = 1.1,
               facts_per_doc: int = 2, sites: int = 6, max_edit: float = 0.12, seed: int = 0) -> WebCorpus:
    """``n_docs`` pages, round(dup_rate n_docs) of them copies (kinds in the ratio exact 1 : near 2 :
    shingled 1), ``topics`` topics with a power-law mix, ``facts_per_doc`` facts per original page."""
    _check("n_docs", n_docs, 1, 10**7, integer=True)
    _check("dup_rate", dup_rate, 0.0, 0.9)
    _check("topics", topics, 1, 1000, integer=True)
    _check("zipf", zipf, 0.0, 5.0)
    _check("facts_per_doc", facts_per_doc, 1, 20, integer=True)
    _check("sites", sites, 1, len(_SITES), integer=True)
    _check("max_edit", max_edit, 0.0, 0.9)
    rng = np.random.default_rng(seed)
    n_docs = int(n_docs)
    n_orig = max(1, n_docs - int(round(dup_rate * n_docs)))
    taken: set[str] = set(_COMMON)
    vocabs = [_words(rng, 40, (2, 3), taken) for _ in range(topics)]
    cdf_word, p_topic = np.cumsum(_zipf(40, 1.0)), _zipf(topics, zipf)
    # Facts: five relations per country, dealt to the original pages, facts_per_doc each.
    n_countries = -(-n_orig * facts_per_doc // len(FACT_TEMPLATES))
    names = [w.capitalize() for w in _words(rng, 3 * n_countries, (2, 3), taken)]
    countries, cities, people = names[:n_countries], names[n_countries:2 * n_countries], names[2 * n_countries:]
    facts = []  # (sentence, question, answer)
    for i, e in enumerate(countries):
        values = {"capital": cities[i], "founded": str(int(rng.integers(800, 1990))),
                  "river": cities[(i + 1) % n_countries] + " river", "export": str(rng.choice(_EXPORTS)),
                  "leader": ("Queen " if rng.random() < 0.5 else "King ") + people[i]}
        for rel, (fact, question) in FACT_TEMPLATES.items():
            facts.append((fact.format(E=e, A=values[rel]), question.format(E=e), values[rel]))
    order = rng.permutation(len(facts))[:n_orig * facts_per_doc]
    site_names = [f"{_SITES[s]} {w.capitalize()}" for s, w in enumerate(_words(rng, sites, (2, 2), taken))]
    header = [[f"{n} | Home | Topics | About | Contact"] + ([_COOKIE] if s % 2 == 0 else []) for s, n in enumerate(site_names)]
    footer = [[f"Copyright {n}. All rights reserved", "Subscribe to our newsletter | Privacy policy | Terms of use"]
              for n in site_names]
    boiler = sorted({ln for s in range(sites) for ln in header[s] + footer[s]})

    # Originals: body sentences (filler and facts), paragraph cuts, topic, site.
    bodies, titles, cuts, topic, site, gold_of_fact = [], [], [], [], [], {}
    for d in range(n_orig):
        t = int(rng.choice(topics, p=p_topic))
        mine = order[d * facts_per_doc:(d + 1) * facts_per_doc]
        sents = [_filler(rng, vocabs[t], cdf_word) for _ in range(int(rng.integers(6, 13)))]
        for j in mine:
            sents.insert(int(rng.integers(0, len(sents) + 1)), facts[j][0])
            gold_of_fact[int(j)] = d
        bodies.append(sents)
        lead = countries[int(mine[0]) // len(FACT_TEMPLATES)]
        titles.append(f"{lead} and the {vocabs[t][int(rng.integers(len(vocabs[t])))]} question.")
        cuts.append(sorted(rng.choice(np.arange(1, len(sents)), size=min(2, len(sents) - 1), replace=False).tolist()))
        topic.append(t)
        site.append(int(rng.integers(sites)))
    fact_sents = {f[0] for f in facts}

    # Copies: kind, source, edited body.
    kinds, sources, rates = ["original"] * n_orig, [-1] * n_orig, [0.0] * n_orig
    for _ in range(n_docs - n_orig):
        src = int(rng.integers(n_orig))
        kind = str(rng.choice(["exact", "near", "near", "shingled"]))
        sents, t, rate = bodies[src], topic[src], 0.0
        if kind == "near":
            rate = float(max_edit * rng.random())
            sents = [s if s in fact_sents else _edit(rng, s, rate, vocabs[t]) for s in sents]
        elif kind == "shingled":
            m = max(1, int(round(len(sents) * rng.uniform(0.6, 0.95))))
            a = int(rng.integers(0, len(sents) - m + 1))
            sents = sents[a:a + m] + [_filler(rng, vocabs[t], cdf_word)]
        bodies.append(sents)
        titles.append(titles[src])
        cuts.append([c for c in cuts[src] if c < len(sents)] if kind != "shingled" else [max(1, len(sents) // 2)])
        topic.append(t)
        site.append(site[src] if kind == "exact" and rng.random() < 0.5 else int(rng.integers(sites)))
        kinds.append(kind)
        sources.append(src)
        rates.append(rate)

    # Crawl order: a random order in which every copy follows its original.
    pos = rng.permutation(n_docs)
    fam = np.array([i if sources[i] < 0 else sources[i] for i in range(n_docs)])
    for f in range(n_orig):  # the family's earliest position goes to the original
        members = np.flatnonzero(fam == f)
        if len(members) > 1:
            slots = np.sort(pos[members])
            pos[f], rest = slots[0], members[members != f]
            pos[rest] = slots[1:][np.argsort(np.argsort(pos[rest], kind="stable"), kind="stable")]
    new_id = np.empty(n_docs, dtype=np.int64)
    new_id[np.argsort(pos, kind="stable")] = np.arange(n_docs)

    docs = [""] * n_docs
    for i in range(n_docs):
        s = site[i]
        lines = header[s] + [titles[i]] + _paragraphs(bodies[i], cuts[i]) + footer[s]
        docs[int(new_id[i])] = "\n".join(lines)
    inv = np.argsort(new_id)
    src_arr = np.array([-1 if sources[i] < 0 else int(new_id[sources[i]]) for i in inv], dtype=np.int64)
    return WebCorpus(docs=docs, source=src_arr, kind=[kinds[i] for i in inv], topic=np.asarray(topic)[inv],
                     site=np.asarray(site)[inv], edit_rate=np.asarray(rates)[inv],
                     questions=[facts[j][1] for j in sorted(gold_of_fact)],
                     answers=[facts[j][2] for j in sorted(gold_of_fact)],
                     gold=np.array([new_id[gold_of_fact[j]] for j in sorted(gold_of_fact)], dtype=np.int64),
                     boilerplate=boiler)
