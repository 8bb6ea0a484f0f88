"""Store-backed search over real stores (Qdrant local mode, LangChain InMemoryVectorStore,
LlamaIndex SimpleVectorStore) through their own clients: ingest, exact-search equality when the
candidates cover the corpus, filter pass-through, refusal of another checkpoint's vectors."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from qdrant_client import QdrantClient, models

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.search import MultiStepSearcher
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings
from qrag_integrations.stores.framework_stores import LangChainMemorySource, LlamaIndexSimpleSource
from qrag_integrations.stores.qdrant import QdrantSource
from qrag_integrations.stores.rows import SortedKeys, ingest
from qrag_integrations.stores.search import StoreSearcher

WORDS = [
    "mary",
    "john",
    "sandra",
    "daniel",
    "went",
    "moved",
    "to",
    "the",
    "kitchen",
    "garden",
    "office",
    "hallway",
    "apple",
    "milk",
    "football",
]
TEXTS = [
    " ".join(WORDS[(3 * i + j) % len(WORDS)] for j in range(2 + i % 4)) + f" {i}" for i in range(14)
]
# "story" continues later; ids sort as the documents are first written, so that a Qdrant count
# layout (which ranks documents as first written) lays them out as the others (by id)
DOCS = ["1-story"] * 6 + ["2-notes"] * 4 + ["1-story"] * 2 + ["3-extra"] * 2
METAS = [{"kind": "even" if i % 2 == 0 else "odd", "i": i} for i in range(14)]
IDS = [f"c{i}" for i in range(14)]
QUESTIONS = ["where is the apple", "what did mary give to john before going to the garden"]
KINDS = ["qdrant", "qdrant-count", "langchain", "llama_index"]


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir),
        position_mode=PositionMode.RELATIVE,
        relative_step=4,
        question_weight=0.5,
    )
    return QRAGModel.from_base(cfg).eval()


@pytest.fixture(scope="module")
def other_model(model: QRAGModel) -> QRAGModel:
    """Same size, another chunk encoder."""
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.chunk_encoder.parameters():
            p.add_(0.01)
    return other


def open_source(kind: str, model: QRAGModel, name: str = "facts"):
    if kind.startswith("qdrant"):
        return QdrantSource(
            QdrantClient(":memory:"),
            name,
            model,
            rank_by="count" if kind == "qdrant-count" else "scroll",
        )
    if kind == "langchain":
        return LangChainMemorySource(
            InMemoryVectorStore(embedding=QRAGEmbeddings(model, batch_size=4)), model
        )
    return LlamaIndexSimpleSource(SimpleVectorStore(), model)


def fill(source, model: QRAGModel) -> None:
    """Two ingest calls; the second continues document "1-story"."""
    ingest(source, model, TEXTS[:10], METAS[:10], IDS[:10], DOCS[:10], batch_size=4)
    ingest(source, model, TEXTS[10:], METAS[10:], IDS[10:], DOCS[10:])


def exact_index(model: QRAGModel) -> ChunkIndex:
    index = ChunkIndex(model.embedding_dim)
    index.add(TEXTS[:10], model.embed_chunks(TEXTS[:10]), METAS[:10], IDS[:10], DOCS[:10])
    index.add(TEXTS[10:], model.embed_chunks(TEXTS[10:]), METAS[10:], IDS[10:], DOCS[10:])
    return index


def tuples(results):
    return [
        [
            (h.chunk.id, h.step, h.position, h.chunk.text, h.chunk.doc_id, h.chunk.order)
            for h in hits
        ]
        for hits in results
    ]


def assert_same(got, want) -> None:
    assert tuples(got) == tuples(want)
    for g, w in zip(got, want):
        assert [h.q_value for h in g] == pytest.approx([h.q_value for h in w], abs=1e-5)
        assert [h.chunk.metadata for h in g] == [h.chunk.metadata for h in w]


@pytest.mark.parametrize("kind", KINDS)
def test_ingest_then_search_equals_exact_in_memory_search(model: QRAGModel, kind: str) -> None:
    source = open_source(kind, model)
    fill(source, model)
    assert source.count() == 14
    index = exact_index(model)
    layout = source.layout(None)  # documents ranked by id; "1-story" continued at order 6
    keys = np.array([[0, o] for o in range(8)] + [[1, o] for o in range(4)] + [[2, 0], [2, 1]])
    assert layout.n == 14 and layout.ranks(keys).tolist() == list(range(14))
    searcher = StoreSearcher(model, source, candidates_per_step=14, check_exact=True)
    assert_same(
        searcher.search(QUESTIONS, k=6), MultiStepSearcher(model, index).search(QUESTIONS, k=6)
    )
    assert searcher.stats.exact_rate == 1.0
    assert [c.id for c in source.get(["c3", "nope", "c11"])] == ["c3", "c11"]


@pytest.mark.parametrize("kind", ["qdrant", "langchain", "llama_index"])
def test_documents_written_in_another_order_search_as_in_memory(
    model: QRAGModel, kind: str
) -> None:
    """Documents written last-first (each in one call, its chunks in order) are ranked by id on
    the store as in memory: the same picks as the in-memory index however they arrived."""
    source = open_source(kind, model)
    rows = list(range(len(TEXTS)))
    for doc in dict.fromkeys(reversed(DOCS)):
        mine = [r for r in rows if DOCS[r] == doc]
        ingest(
            source,
            model,
            [TEXTS[r] for r in mine],
            [METAS[r] for r in mine],
            [IDS[r] for r in mine],
            [doc] * len(mine),
        )
    searcher = StoreSearcher(model, source, candidates_per_step=14, check_exact=True)
    assert_same(
        searcher.search(QUESTIONS, k=6),
        MultiStepSearcher(model, exact_index(model)).search(QUESTIONS, k=6),
    )


@pytest.fixture(scope="module", params=[PositionMode.DOCUMENT, PositionMode.DOCUMENT_RELATIVE])
def document_model(model: QRAGModel, request: pytest.FixtureRequest) -> QRAGModel:
    """The same weights with positions laid out inside each document (the default's modes)."""
    other = copy.deepcopy(model)
    other.config.position_mode = request.param
    return other


@pytest.mark.parametrize("kind", KINDS)
def test_document_positions_equal_the_exact_search_on_every_store(
    document_model: QRAGModel, kind: str
) -> None:
    # a Qdrant count layout once had no document_positions: the default model crashed there
    source = open_source(kind, document_model)
    fill(source, document_model)
    exact = MultiStepSearcher(document_model, exact_index(document_model))
    searcher = StoreSearcher(document_model, source, candidates_per_step=14)
    assert_same(searcher.search(QUESTIONS, k=6), exact.search(QUESTIONS, k=6))
    assert_same(
        searcher.search(QUESTIONS, k=4, filter={"kind": "odd"}),
        exact.search(QUESTIONS, k=4, filter={"kind": "odd"}),
    )
    assert {h.position for hits in exact.search(QUESTIONS, k=6) for h in hits} - {0}


@pytest.mark.parametrize("kind", KINDS)
def test_filters_pass_through(model: QRAGModel, kind: str) -> None:
    source = open_source(kind, model)
    fill(source, model)
    exact = MultiStepSearcher(model, exact_index(model))
    searcher = StoreSearcher(model, source, candidates_per_step=14)
    native = {
        "qdrant": models.Filter(
            must=[models.FieldCondition(key="metadata.kind", match=models.MatchValue(value="odd"))]
        ),
        "langchain": lambda doc: doc.metadata["kind"] == "odd",
        "llama_index": MetadataFilters(
            filters=[MetadataFilter(key="kind", value="odd", operator=FilterOperator.EQ)]
        ),
    }[kind.split("-")[0]]
    want = exact.search(QUESTIONS, k=4, filter={"kind": "odd"})
    assert_same(searcher.search(QUESTIONS, k=4, filter={"kind": "odd"}), want)
    assert_same(searcher.search(QUESTIONS, k=4, filter=native), want)
    assert_same(
        searcher.search(QUESTIONS, k=3, filter={"i": [1, 2, 12]}),
        exact.search(QUESTIONS, k=3, filter={"i": [1, 2, 12]}),
    )
    assert searcher.search(QUESTIONS, k=3, filter={"kind": "none"}) == [[], []]


@pytest.mark.parametrize("kind", KINDS)
def test_small_candidate_counts_are_exact_when_they_hold_the_arg_max(
    model: QRAGModel, kind: str
) -> None:
    source = open_source(kind, model)
    fill(source, model)
    exact = MultiStepSearcher(model, exact_index(model))
    outcomes = []
    for cps in (1, 2, 4, 8, 11, 13):
        for question in QUESTIONS:
            searcher = StoreSearcher(model, source, candidates_per_step=cps, check_exact=True)
            got = searcher.search([question], k=5)
            assert searcher.stats.exact_checked == 5
            outcomes.append(searcher.stats.exact_rate == 1.0)
            if outcomes[-1]:
                assert_same(got, exact.search([question], k=5))
    assert any(outcomes) and not all(outcomes)  # fewer than 14 candidates: some exact, some missed


@pytest.mark.parametrize("kind", KINDS)
def test_refuses_another_checkpoints_vectors(
    model: QRAGModel, other_model: QRAGModel, tiny_bert_dir_48: Path, kind: str
) -> None:
    source = open_source(kind, other_model)
    fill(source, other_model)
    small = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir_48))).eval()
    reopen = {
        "qdrant": lambda m: QdrantSource(source.client, "facts", m),
        "langchain": lambda m: LangChainMemorySource(source.store, m),
        "llama_index": lambda m: LlamaIndexSimpleSource(source.store, m),
    }[kind.split("-")[0]]
    with pytest.raises(IndexMismatchError, match="another chunk encoder|not this checkpoint"):
        reopen(model)
    with pytest.raises(IndexMismatchError, match="48-dimensional|not this checkpoint"):
        reopen(small)


def test_qdrant_refuses_foreign_collections(model: QRAGModel) -> None:
    client = QdrantClient(":memory:")
    client.create_collection(
        "cos", vectors_config=models.VectorParams(size=32, distance=models.Distance.COSINE)
    )
    with pytest.raises(IndexMismatchError, match="Cosine distance"):
        QdrantSource(client, "cos", model)
    client.create_collection(
        "plain", vectors_config=models.VectorParams(size=32, distance=models.Distance.DOT)
    )
    client.upsert(
        "plain", [models.PointStruct(id=1, vector=[0.1] * 32, payload={"page_content": "x"})]
    )
    with pytest.raises(IndexMismatchError, match="not written by a Q-RAG ingest"):
        QdrantSource(client, "plain", model)
    with pytest.raises(QRAGError, match="does not exist"):
        QdrantSource(client, "missing", model, create=False)
    source = QdrantSource(client, "ok", model)
    fill(source, model)
    with pytest.raises(QRAGError, match="already in the store"):
        ingest(source, model, ["again"], ids=["c1"])
    with pytest.raises(QRAGError, match="reserved"):
        ingest(source, model, ["x"], metadatas=[{"qrag_order": 3}])
    with pytest.raises(QRAGError, match="mapping or a qdrant_client"):
        StoreSearcher(model, source).search(QUESTIONS, k=2, filter=lambda m: True)
    assert source.count() == 14


def test_qdrant_on_disk_reopens(model: QRAGModel, tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "q"))
    fill(QdrantSource(client, "facts", model), model)
    client.close()
    source = QdrantSource(QdrantClient(path=str(tmp_path / "q")), "facts", model, create=False)
    want = MultiStepSearcher(model, exact_index(model)).search(QUESTIONS, k=4)
    assert_same(StoreSearcher(model, source, candidates_per_step=14).search(QUESTIONS, k=4), want)
    assert source.next_doc_rank() == 3
    source.client.close()


def test_sorted_keys_ranks_match_a_plain_count() -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 5, size=(40, 2))
    keys = np.unique(keys, axis=0)
    layout = SortedKeys(keys[rng.permutation(len(keys))])
    probe = rng.integers(0, 6, size=(25, 2))
    want = [sum(tuple(k) < tuple(p) for k in keys.tolist()) for p in probe.tolist()]
    assert layout.ranks(probe).tolist() == want
    assert layout.n == len(keys)


def test_qdrant_document_order_is_reused_until_the_collection_changes(model: QRAGModel) -> None:
    source = open_source("qdrant", model)
    fill(source, model)
    first = source.layout({"kind": "odd"})
    assert source.layout({"kind": "odd"}) is first and source.layout(None) is not first
    ingest(source, model, ["mary went to the office"], [{"kind": "odd"}], ["late"], ["2-notes"])
    grown = source.layout({"kind": "odd"})
    assert grown is not first and grown.n == first.n + 1
    # odd chunks: story (0, 1/3/5/7), notes (1, 1/3), then the new notes chunk (1, 4), extra (2, 1)
    assert grown.ranks(np.array([[1, 4]])).tolist() == [6]
    source.delete(["late"])
    assert source.layout({"kind": "odd"}).n == first.n
    source.client.upsert(
        "facts",
        [
            models.PointStruct(
                id=7, vector=[0.1] * 32, payload={"page_content": "x", "metadata": {"kind": "odd"}}
            )
        ],
    )
    with pytest.raises(IndexMismatchError, match="without Q-RAG order fields"):
        source.layout({"kind": "odd"})
