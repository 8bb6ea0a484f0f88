"""The retriever's search fields (BM25 fusion: ``lexical_depth``, ``lexical_steps``,
``lexical_gap``, ``lexical_weight``; ``supersede``) reach the core search."""

from __future__ import annotations

import pytest
from search_reference import rules, with_config

from qrag_integrations import QRAGRetriever
from qrag_integrations.core.search import MultiStepSearcher

WORDS = ["apple", "river", "garden", "kitchen", "football", "office", "milk", "castle"]
TEXTS = [f"{WORDS[i % 8]} {WORDS[(3 * i + 1) % 8]} note {i}" for i in range(24)]
QUERIES = ["where is the football", "apple garden", "castle milk river", "kitchen office note"]


def ids_of(docs) -> list[str]:
    return [d.id for d in docs]


def test_lexical_steps_limits_fusion_as_the_core_search_does(make_model) -> None:
    model = make_model("none")
    results: dict[int | None, list[list[str]]] = {}
    for steps in (1, None):
        retriever = QRAGRetriever(
            model=model, texts=TEXTS, k=4, lexical_depth=3, lexical_steps=steps
        )
        policy = rules(model, lexical_depth=3, lexical_steps=steps)
        assert retriever.policy == policy
        core = MultiStepSearcher(model, retriever.index, policy=policy).search(QUERIES, k=4)
        results[steps] = [ids_of(retriever.invoke(q)) for q in QUERIES]
        assert results[steps] == [[h.chunk.id for h in hits] for hits in core]
    assert results[1] != results[None]  # fusing only the first step changes later picks


def test_lexical_gap_reaches_the_core_search(make_model) -> None:
    model = make_model("none")
    results: dict[float | None, list[list[str]]] = {}
    for gap in (None, 1e6):  # None: the model's (none); 1e6: every later step is unsure
        settings = {"lexical_depth": 3, "lexical_steps": 1, "lexical_gap": gap}
        retriever = QRAGRetriever(model=model, texts=TEXTS, k=4, **settings)
        core = MultiStepSearcher(model, retriever.index, policy=rules(model, **settings))
        results[gap] = [ids_of(retriever.invoke(q)) for q in QUERIES]
        assert results[gap] == [[h.chunk.id for h in hits] for hits in core.search(QUERIES, k=4)]
    assert results[None] != results[1e6]
    with pytest.raises(ValueError, match="lexical_gap"):
        QRAGRetriever(model=model, lexical_gap=-0.5)


def test_lexical_weight_reaches_the_core_search(make_model) -> None:
    model = make_model("none")
    results: dict[float | None, list[list[str]]] = {}
    for weight in (1e-9, 1e6):  # 1e-9: Q decides, as without fusion; 1e6: BM25 decides in the pool
        settings = {"lexical_depth": 5, "lexical_steps": 1, "lexical_weight": weight}
        retriever = QRAGRetriever(model=model, texts=TEXTS, k=3, **settings)
        assert retriever.policy == rules(model, **settings)
        core = MultiStepSearcher(model, retriever.index, policy=rules(model, **settings))
        results[weight] = [ids_of(retriever.invoke(q)) for q in QUERIES]
        assert results[weight] == [[h.chunk.id for h in hits] for hits in core.search(QUERIES, k=3)]
    assert results[1e-9] != results[1e6]
    with pytest.raises(ValueError, match="lexical_weight"):
        QRAGRetriever(model=model, lexical_weight=-1)


def test_bad_lexical_steps_is_refused_by_name(make_model) -> None:
    for bad in (0, -2):
        with pytest.raises(ValueError, match="lexical_steps"):
            QRAGRetriever(model=make_model("none"), lexical_steps=bad)


def test_supersede_reaches_the_core_search(make_model) -> None:
    model = with_config(make_model("none"), supersede_margin=1e6, supersede_similarity=-1)
    results = {}
    for flag in (None, False):
        retriever = QRAGRetriever(model=model, k=3, supersede=flag)
        retriever.add_texts(TEXTS, doc_id="one")  # restatements supersede within a document
        core = MultiStepSearcher(model, retriever.index, policy=rules(model, supersede=flag))
        results[flag] = [ids_of(retriever.invoke(q)) for q in QUERIES]
        assert results[flag] == [[h.chunk.id for h in hits] for hits in core.search(QUERIES, k=3)]
    assert results[None] != results[False]  # the model's rule is on unless switched off
