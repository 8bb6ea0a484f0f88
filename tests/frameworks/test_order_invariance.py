"""The same question over the same documents gets the same picks, whatever the order in which the
documents were added (property tests, tiny random BERT under the default's search rules)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document as LCDocument
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS
from search_reference import with_config

from qrag_integrations import QRAGRetriever

QUESTIONS = list(BABI_QUESTIONS[:4])
#: Five documents of one to three chunks each, cut from the bAbI-style sentences.
CUTS = (0, 3, 4, 7, 8, len(BABI_TEXTS))
DOCUMENTS = {f"doc{i}": list(BABI_TEXTS[a:b]) for i, (a, b) in enumerate(itertools.pairwise(CUTS))}
#: The default checkpoint's search rules (BM25 fusion, its gap, restatements), on a tiny model.
DEFAULT_RULES = {
    "lexical_depth": 20,
    "lexical_steps": 1,
    "lexical_gap": 0.03,
    "lexical_weight": 0.3,
    "supersede_margin": 0.05,
    "supersede_similarity": 0.8,
}
#: Position modes: the default's (per document) and one laid out over the whole index.
MODES = ("document-relative-anchored", "relative")


def picks(retriever: QRAGRetriever) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.chunk.id, h.position, round(h.q_value, 5)) for h in hits]
        for hits in retriever.search(QUESTIONS, k=3)
    ]


def arrivals() -> st.SearchStrategy[list[tuple[str, int]]]:
    """An order of arrival of every ``(document, chunk number)``: any interleaving of the
    documents that keeps each document's own chunks in order."""
    slots = [d for d, texts in DOCUMENTS.items() for _ in texts]
    return st.permutations(slots).map(_numbered)


def _numbered(order: list[str]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    out = []
    for d in order:
        out.append((d, seen.get(d, 0)))
        seen[d] = seen.get(d, 0) + 1
    return out


@pytest.fixture(scope="module", params=MODES)
def model(request: Any, make_model: Any) -> Any:
    return with_config(make_model(request.param), **DEFAULT_RULES)


@pytest.fixture(scope="module")
def reference(model: Any) -> list[list[tuple[str, int, float]]]:
    retriever = QRAGRetriever(model=model, k=3)
    for d, texts in DOCUMENTS.items():
        retriever.add_texts(texts, metadatas=[{"source": d}] * len(texts))
    return picks(retriever)


@settings(max_examples=8, deadline=None)
@given(order=arrivals(), batch=st.integers(1, 4))
def test_documents_in_any_order_give_the_same_picks(
    model: Any, reference: Any, order: list[tuple[str, int]], batch: int
) -> None:
    retriever = QRAGRetriever(model=model, k=3)
    for start in range(0, len(order), batch):
        part = order[start : start + batch]
        retriever.add_texts(
            [DOCUMENTS[d][i] for d, i in part], metadatas=[{"source": d} for d, _ in part]
        )
    assert picks(retriever) == reference


@settings(max_examples=8, deadline=None)
@given(order=st.permutations(list(DOCUMENTS)))
def test_split_langchain_documents_in_any_order_give_the_same_picks(
    model: Any, order: list[str]
) -> None:
    """LangChain Documents with ids, each cut by a splitter into its sentences."""

    class Lines:
        def split_text(self, text: str) -> list[str]:
            return text.split("\n")

    def build(names: list[str]) -> QRAGRetriever:
        docs = [LCDocument(id=d, page_content="\n".join(DOCUMENTS[d])) for d in names]
        return QRAGRetriever.from_documents(docs, model=model, k=3, text_splitter=Lines())

    assert picks(build(order)) == picks(build(list(DOCUMENTS)))


@settings(max_examples=8, deadline=None)
@given(order=st.permutations(range(len(BABI_TEXTS))))
def test_texts_without_documents_in_any_order_give_the_same_picks(
    model: Any, order: list[int]
) -> None:
    """``from_texts`` without ``doc_id``: each text its own document, ids derived from the text."""
    shuffled = QRAGRetriever(model=model, k=3, texts=[BABI_TEXTS[i] for i in order])
    assert picks(shuffled) == picks(QRAGRetriever(model=model, k=3, texts=list(BABI_TEXTS)))
