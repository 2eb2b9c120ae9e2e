"""A small retrieval-augmented generation pipeline: retrieve, then read (Chapter 25, Sections 4-5).

The corpus (``datasets.make_corpus``) is generated from a seed: invented countries, each with one fact
per relation (capital, founding year, river, export, leader) written from a template, shuffled into
passages of a few facts about different countries, so a question's passage also holds distractors and
another passage holds the same country's other facts. A question is the relation's question template with the country.

Pipeline: embed the passages once (any ``embed(texts) -> (n, d)`` with unit rows: MiniLM in the
chapter, ``hashing_embedder`` here), embed the question, take the k passages of largest inner product
(``vectors.knn`` with metric "ip"), and let a deterministic **extractive reader** return the span of
the first retrieved sentence that states the asked relation of the asked country. The reader never
invents: an answer is right exactly when the fact's passage is among the k retrieved, so answer
accuracy vs k is the retriever's hit rate (Section 7 measures both).
"""
from __future__ import annotations

import re
import zlib
from typing import Callable

import numpy as np

from ..datasets import RELATIONS, Corpus
from .vectors import knn

Embed = Callable[[list[str]], np.ndarray]


def _pattern(template: str, entity: str, answer: str) -> re.Pattern:
    parts = re.split(r"(\{E\}|\{A\})", template)
    return re.compile("".join(entity if t == "{E}" else answer if t == "{A}" else re.escape(t) for t in parts))


_QUESTIONS = [(rel, _pattern(q, r"(?P<e>[A-Z][a-z]+)", "")) for rel, (_, q) in RELATIONS.items()]


def parse_question(question: str) -> tuple[str, str]:
    """(relation, country) of a templated question; ValueError for any other text."""
    for rel, pat in _QUESTIONS:
        m = pat.fullmatch(question.strip())
        if m:
            return rel, m.group("e")
    raise ValueError(f"the reader answers only the templated questions of datasets.RELATIONS, got {question!r}")


def read_answer(question: str, passages: list[str]) -> str | None:
    """The extractive reader: the answer span of the first sentence, in retrieval order, that states the
    question's relation of the question's country; None when no retrieved passage states it."""
    rel, entity = parse_question(question)
    pat = _pattern(RELATIONS[rel][0], re.escape(entity), r"(?P<a>[^.]+?)")
    for passage in passages:
        for sentence in re.findall(r"[^.]+\.", passage):
            m = pat.fullmatch(sentence.strip())
            if m:
                return m.group("a")
    return None


def hashing_embedder(dim: int = 512) -> Embed:
    """A NumPy stand-in for a sentence encoder: hashed lower-case words and character trigrams, summed
    and scaled to unit length (deterministic: crc32, not Python's salted hash)."""
    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for r, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                grams = [w] + [w[i:i + 3] for i in range(max(1, len(w) - 2))]
                for g in grams:
                    out[r, zlib.crc32(g.encode()) % dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return embed


def retrieve(question_vectors: np.ndarray, passage_vectors: np.ndarray, k: int) -> np.ndarray:
    """Ids (nq, k) of the k passages of largest inner product per question (ties: smaller id)."""
    return knn(np.asarray(question_vectors), np.asarray(passage_vectors), k, metric="ip")[1]


def answer(question: str, embed: Embed, passages: list[str], passage_vectors: np.ndarray, k: int = 3) -> str | None:
    """Retrieve k passages for the question, then read the answer from them."""
    ids = retrieve(embed([question]), passage_vectors, k)[0]
    return read_answer(question, [passages[i] for i in ids if i >= 0])


def rag_accuracy(corpus: Corpus, passage_vectors: np.ndarray, question_vectors: np.ndarray,
                 ks: list[int]) -> dict[int, tuple[float, float]]:
    """For each k: (share of questions answered exactly right, share whose gold passage was retrieved)."""
    ids = retrieve(question_vectors, passage_vectors, max(ks))
    out = {}
    for k in ks:
        right = hit = 0
        for q, a, g, row in zip(corpus.questions, corpus.answers, corpus.gold, ids[:, :k]):
            hit += int(g in row)
            right += read_answer(q, [corpus.passages[i] for i in row if i >= 0]) == a
        out[k] = (right / len(corpus.questions), hit / len(corpus.questions))
    return out
