"""One filter language on every search path: random metadata and random filters of every form
(tests/filter_reference.py), searched with ``k`` covering the corpus in memory, with FAISS
pre-selection, and over Qdrant local (scrolled and counted layouts), LangChain's
``InMemoryVectorStore`` and LlamaIndex's ``SimpleVectorStore``: each returns exactly the chunks
the reference admits (no leak, no miss). LlamaIndex ``MetadataFilters`` of every operator and
condition it defines, native Qdrant filters on bare keys, and refusals before any search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from filter_reference import FILTERS, METADATA, reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from qdrant_client import QdrantClient, models
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS

from qrag_integrations import MultiStepSearcher, QRAGError, QRAGRetriever, SearchSettings
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.conversion import from_llama_filters
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings
from qrag_integrations.stores.qdrant_filters import qdrant_filter

PATHS = ["memory", "faiss", "qdrant", "qdrant-count", "langchain", "llama_index"]
PROPERTY = settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir), position_mode=PositionMode.RELATIVE, relative_step=4
    )
    return QRAGModel.from_base(cfg).eval()


def retriever(path: str, model: QRAGModel, metas: list[dict[str, Any]]) -> QRAGRetriever:
    """A retriever on ``path`` holding one chunk per metadata dict (ids ``c0``, ``c1``...)."""
    options: dict[str, Any] = {"candidates_per_step": 1}
    if path.startswith("qdrant"):
        store: Any = QdrantClient(":memory:")
        options.update(collection_name="f", rank_by="count" if path == "qdrant-count" else "scroll")
    elif path == "langchain":
        store = InMemoryVectorStore(embedding=QRAGEmbeddings(model))
    elif path == "llama_index":
        store = SimpleVectorStore()
    else:
        store = None
    r = (
        QRAGRetriever(model=model)
        if store is None
        else QRAGRetriever.from_store(store, model=model, **options)
    )
    texts = [BABI_TEXTS[i % len(BABI_TEXTS)] for i in range(len(metas))]
    r.add_texts(texts, metadatas=metas, ids=[f"c{i}" for i in range(len(metas))])
    return r


def found(path: str, r: QRAGRetriever, flt: Any, k: int) -> set[str]:
    """Chunk ids a search with ``flt`` returns (one question, no threshold)."""
    if path == "faiss":  # FAISS pre-selection from the first chunk on
        searcher = MultiStepSearcher(
            r.model, r.index, SearchSettings(faiss_candidates=2, faiss_min_size=0)
        )
        hits = searcher.search([BABI_QUESTIONS[0]], k, filter=flt)[0]
    else:
        hits = r.search([BABI_QUESTIONS[0]], k=k, filter=flt)[0]
    ids = [h.chunk.id for h in hits]
    assert len(ids) == len(set(ids))
    return set(ids)


@pytest.mark.parametrize("path", PATHS)
@PROPERTY
@given(
    metas=st.lists(METADATA, min_size=1, max_size=6), flts=st.lists(FILTERS, min_size=1, max_size=3)
)
def test_every_form_returns_exactly_the_matching_chunks_on_every_path(
    model: QRAGModel, path: str, metas: list[dict[str, Any]], flts: list[dict[str, Any]]
) -> None:
    r = retriever(path, model, metas)
    for flt in flts:
        want = {f"c{i}" for i, m in enumerate(metas) if reference(m, flt)}
        assert found(path, r, flt, len(metas)) == want, flt


# -- LlamaIndex MetadataFilters --------------------------------------------------------------------
#: Each LlamaIndex operator as the filter mapping it means here.
LLAMA_MEANING = {
    FilterOperator.EQ: lambda k, v: {k: {"$eq": v}},
    FilterOperator.NE: lambda k, v: {k: {"$ne": v}},
    FilterOperator.GT: lambda k, v: {k: {"$gt": v}},
    FilterOperator.GTE: lambda k, v: {k: {"$gte": v}},
    FilterOperator.LT: lambda k, v: {k: {"$lt": v}},
    FilterOperator.LTE: lambda k, v: {k: {"$lte": v}},
    FilterOperator.IN: lambda k, v: {k: {"$in": v}},
    FilterOperator.NIN: lambda k, v: {k: {"$nin": v}},
    FilterOperator.CONTAINS: lambda k, v: {k: {"$contains": v}},
    FilterOperator.TEXT_MATCH: lambda k, v: {k: {"$contains": v}},
    FilterOperator.ANY: lambda k, v: {"$or": [{k: {"$contains": x}} for x in v]},
    FilterOperator.ALL: lambda k, v: {"$and": [{k: {"$contains": x}} for x in v]},
    FilterOperator.IS_EMPTY: lambda k, v: {
        "$or": [{k: {"$exists": False}}, {k: None}, {k: ""}, {k: {"$eq": []}}]
    },
}
LIST_OPERATORS = {FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL}
STRICT = st.one_of(
    st.sampled_from(["a", "b", "ab"]), st.integers(-2, 2), st.sampled_from([0.5, 1.0])
)


@st.composite
def llama_filter(draw: st.DrawFn) -> tuple[MetadataFilter, dict[str, Any]]:
    op = draw(st.sampled_from(sorted(LLAMA_MEANING, key=lambda o: o.value)))
    key = draw(st.sampled_from(["t", "n", "tags"]))
    if op in LIST_OPERATORS:
        value: Any = draw(
            st.one_of(
                st.lists(st.sampled_from(["a", "b"]), max_size=2),
                st.lists(st.integers(-2, 2), max_size=2),
            )
        )
    elif op == FilterOperator.TEXT_MATCH:
        value = draw(st.sampled_from(["a", "b", "ab"]))
    else:
        value = draw(STRICT)
    return MetadataFilter(key=key, value=value, operator=op), LLAMA_MEANING[op](key, value)


@st.composite
def llama_filters(draw: st.DrawFn, depth: int = 1) -> tuple[MetadataFilters, dict[str, Any]]:
    parts = draw(
        st.lists(
            llama_filter() if depth == 0 else st.one_of(llama_filter(), llama_filters(depth - 1)),
            min_size=1,
            max_size=3,
        )
    )
    condition = draw(st.sampled_from(list(FilterCondition)))
    meant = [m for _, m in parts]
    mapping = {
        FilterCondition.AND: {"$and": meant},
        FilterCondition.OR: {"$or": meant},
        FilterCondition.NOT: {"$not": {"$or": meant}},
    }[condition]
    return MetadataFilters(filters=[f for f, _ in parts], condition=condition), mapping


def test_every_llama_operator_is_mapped_or_refused_by_name() -> None:
    for op in FilterOperator:
        flt = MetadataFilters(
            filters=[
                MetadataFilter(
                    key="t", value="a" if op not in LIST_OPERATORS else ["a"], operator=op
                )
            ]
        )
        if op in LLAMA_MEANING:
            assert from_llama_filters(flt) == {
                "$and": [LLAMA_MEANING[op]("t", flt.filters[0].value)]
            }
        else:
            with pytest.raises(QRAGError, match=op.name):
                from_llama_filters(flt)
    assert {*LLAMA_MEANING, FilterOperator.TEXT_MATCH_INSENSITIVE} == set(FilterOperator)


@pytest.mark.parametrize("path", PATHS)
@PROPERTY
@given(metas=st.lists(METADATA, min_size=1, max_size=6), flt=llama_filters())
def test_llama_metadata_filters_work_on_every_path(
    model: QRAGModel,
    path: str,
    metas: list[dict[str, Any]],
    flt: tuple[MetadataFilters, dict[str, Any]],
) -> None:
    native, meant = flt
    r = retriever(path, model, metas)
    want = {f"c{i}" for i, m in enumerate(metas) if reference(m, meant)}
    if path == "faiss":  # the core searcher takes the converted mapping
        assert found(path, r, from_llama_filters(native), len(metas)) == want
    else:
        assert found(path, r, native, len(metas)) == want
        got = r.retrieve(BABI_QUESTIONS[1], k=len(metas), filter=native)
        assert {n.node.node_id for n in got} == want


# -- what the properties look for, spelled out ---------------------------------------------------------
ISSUE_ROWS = [{"t": "a"}, {"t": "b"}, {"t": None}, {"t": "c"}, {"u": 1}, {"t": ["a", "b"]}]


@pytest.mark.parametrize("path", PATHS)
def test_the_forms_the_issue_named_match_on_every_path(model: QRAGModel, path: str) -> None:
    r = retriever(path, model, ISSUE_ROWS)
    k = len(ISSUE_ROWS)
    assert found(path, r, {"t": {"$eq": "a"}}, k) == {"c0"}
    assert found(path, r, {"t": {"$in": ["a", "b"]}}, k) == {"c0", "c1"}
    assert found(path, r, {"$or": [{"t": "a"}, {"u": 1}]}, k) == {"c0", "c4"}
    assert found(path, r, {"t": {"$ne": "a"}}, k) == {"c1", "c2", "c3", "c4", "c5"}
    assert found(path, r, {"t": None}, k) == {"c2"}
    assert found(path, r, {"t": {"$contains": "a"}}, k) == {"c0", "c5"}
    for bad in ({"t": {"$regex": "a"}}, {"t": {"$in": "a"}}):
        with pytest.raises(QRAGError, match="supported|takes a list"):
            found(path, r, bad, k)


@pytest.mark.parametrize("path", ["qdrant", "qdrant-count"])
def test_a_native_qdrant_filter_on_a_bare_key_reads_the_metadata(
    model: QRAGModel, path: str
) -> None:
    r = retriever(path, model, [{"package": "numpy"}, {"package": "torch"}, {"package": "numpy"}])
    bare = models.Filter(
        must=[models.FieldCondition(key="package", match=models.MatchValue(value="numpy"))]
    )
    full = models.Filter(
        must=[models.FieldCondition(key="metadata.package", match=models.MatchValue(value="numpy"))]
    )
    assert found(path, r, bare, 3) == found(path, r, full, 3) == {"c0", "c2"}
    not_torch = models.Filter(
        must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key="package"))],
        should=[
            models.FieldCondition(key="package", match=models.MatchExcept(**{"except": ["torch"]}))
        ],
    )
    assert found(path, r, not_torch, 3) == {"c0", "c2"}


@settings(max_examples=200, deadline=None, database=None)
@given(metas=st.lists(METADATA, min_size=1, max_size=8), flt=FILTERS)
def test_the_qdrant_push_down_never_drops_a_matching_chunk(
    metas: list[dict[str, Any]], flt: dict[str, Any]
) -> None:
    client = QdrantClient(":memory:")
    client.create_collection(
        "f", vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT)
    )
    client.upsert(
        "f",
        [
            models.PointStruct(id=i, vector=[1.0], payload={"metadata": m})
            for i, m in enumerate(metas)
        ],
    )
    pushed = qdrant_filter(flt)
    got = {p.id for p in client.scroll("f", scroll_filter=pushed, limit=100)[0]}
    assert {i for i, m in enumerate(metas) if reference(m, flt)} <= got


def test_a_store_refuses_a_callable_and_a_bad_filter_before_any_search(model: QRAGModel) -> None:
    for path in ("qdrant", "llama_index"):
        r = retriever(path, model, [{"t": "a"}])
        with pytest.raises(QRAGError, match="takes a filter mapping"):
            found(path, r, lambda m: True, 1)
