"""Stores a framework filled its own way (``InMemoryVectorStore.from_documents`` with
``QRAGEmbeddings``, a ``VectorStoreIndex`` with ``QRAGLlamaEmbedding``) are searched in place with
the in-memory index's picks: chunk ids, documents and order derived as the in-memory index derives
them, whatever order the documents came in."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.errors import IndexMismatchError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings, QRAGLlamaEmbedding
from qrag_integrations.frameworks.retriever import QRAGRetriever
from qrag_integrations.stores.derived import Record, derive
from qrag_integrations.stores.framework_stores import LangChainMemorySource
from qrag_integrations.stores.rows import ingest

WORDS = "mary john sandra went moved to the kitchen garden office hallway apple milk football"
WORDS = WORDS.split()
#: (id, text, source): "story" and "notes" span several chunks, in order; the rest stand alone.
CHUNKS = [
    (f"x{i}", " ".join(WORDS[(5 * i + j) % len(WORDS)] for j in range(3 + i % 3)), src)
    for i, src in enumerate(
        ["story"] * 4 + [None] * 3 + ["notes"] * 3 + [None, "story", "notes", None]
    )
]
QUESTIONS = ["where is the apple", "what did mary give to john", "who went to the garden"]


@pytest.fixture(scope="module", params=[PositionMode.RELATIVE, PositionMode.DOCUMENT])
def model(tiny_bert_dir: Path, request: pytest.FixtureRequest) -> QRAGModel:
    cfg = QRAGConfig(base_model=str(tiny_bert_dir), position_mode=request.param, relative_step=4)
    return QRAGModel.from_base(cfg).eval()


def documents(shuffle: int | None = None) -> list[Document]:
    """The chunks as LangChain Documents; ``shuffle``: documents in a seeded order of arrival,
    the chunks of each document still in their order."""
    docs = [
        Document(id=i, page_content=t, metadata={"n": n, **({"source": s} if s else {})})
        for n, (i, t, s) in enumerate(CHUNKS)
    ]
    if shuffle is None:
        return docs
    queues: dict[str, list[Document]] = {}
    for d in docs:
        queues.setdefault(d.metadata.get("source", d.id), []).append(d)
    slots = [s for s, q in queues.items() for _ in q]
    random.Random(shuffle).shuffle(slots)
    return [queues[s].pop(0) for s in slots]


def hits(retriever: QRAGRetriever, **kwargs) -> list[list[tuple]]:
    return [
        [(h.chunk.id, h.chunk.doc_id, h.chunk.order, h.position, round(h.q_value, 4)) for h in hs]
        for hs in retriever.search(QUESTIONS, **kwargs)
    ]


def in_place(model: QRAGModel, store) -> QRAGRetriever:
    return QRAGRetriever.from_store(store, model=model, k=5, candidates_per_step=len(CHUNKS))


@pytest.mark.parametrize("shuffle", [None, 1, 2])
def test_a_langchain_filled_store_picks_as_the_in_memory_index(
    model: QRAGModel, shuffle: int | None
) -> None:
    memory = QRAGRetriever.from_documents(documents(), model=model, k=5)
    store = InMemoryVectorStore.from_documents(documents(shuffle), QRAGEmbeddings(model))
    retriever = in_place(model, store)
    assert len(retriever) == len(CHUNKS)
    assert hits(retriever) == hits(memory)
    assert hits(retriever, filter={"n": {"$gte": 3}}, k=3) == hits(
        memory, filter={"n": {"$gte": 3}}, k=3
    )
    layout = retriever.source.layout(None)
    assert list(layout.ids()) == [c.id for c in memory.index.snapshot().chunks]
    # derived: "story" chunks in their order of arrival, a chunk without source its own document
    assert [(c.doc_id, c.order) for c in retriever.source.get(["x11", "x4"])] == [
        ("story", 4),
        ("x4", 0),
    ]
    assert sorted(retriever.source.chunks_of_documents(["notes"])) == ["x12", "x7", "x8", "x9"]


def test_chunks_added_through_the_retriever_join_a_framework_filled_store(model: QRAGModel) -> None:
    memory = QRAGRetriever.from_documents(documents(), model=model, k=5)
    store = InMemoryVectorStore.from_documents(documents(), QRAGEmbeddings(model))
    retriever = in_place(model, store)
    more = [
        Document(id="late", page_content="john went to the office", metadata={"source": "story"})
    ]
    retriever.add_documents(more)
    memory.add_documents(more)
    assert [(c.doc_id, c.order) for c in retriever.source.get(["late"])] == [("story", 5)]
    assert hits(retriever) == hits(memory)
    retriever.delete(["story"])  # a document id deletes its chunks, derived or written by us
    memory.delete(["story"])
    assert len(retriever) == len(memory) == len(CHUNKS) - 5
    assert hits(retriever) == hits(memory)


def nodes() -> list[TextNode]:
    """The chunks as LlamaIndex nodes: a source becomes the node's ``ref_doc_id``."""
    out = []
    for i, t, s in CHUNKS:
        rel = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=s)} if s else {}
        out.append(TextNode(id_=i, text=t, relationships=rel))
    return out


def test_a_vector_store_index_is_searched_in_place(model: QRAGModel) -> None:
    simple = SimpleVectorStore()
    index = VectorStoreIndex(
        nodes(),
        embed_model=QRAGLlamaEmbedding(model),
        storage_context=StorageContext.from_defaults(vector_store=simple),
    )
    memory = QRAGRetriever.from_nodes(nodes(), model=model, k=5)
    retriever = in_place(model, index)
    assert hits(retriever) == hits(memory)
    assert [(c.doc_id, c.order) for c in retriever.source.get(["x11", "x0", "x5"])] == [
        ("story", 4),
        ("story", 0),
        ("x5", 0),
    ]
    # the vector store alone holds no texts: the refusal says what to pass instead
    with pytest.raises(IndexMismatchError, match="pass the VectorStoreIndex itself"):
        in_place(model, simple)


def test_a_vector_store_index_embeds_metadata_with_the_text_and_is_accepted(
    model: QRAGModel,
) -> None:
    tagged = [TextNode(id_=i, text=t, metadata={"room": "kitchen"}) for i, t, _ in CHUNKS]
    index = VectorStoreIndex(tagged, embed_model=QRAGLlamaEmbedding(model))
    retriever = in_place(model, index)
    assert len(retriever) == len(CHUNKS)
    assert hits(retriever, filter={"room": "kitchen"}, k=2)[0]


def test_stores_of_another_embedding_model_are_refused_naming_adopt(model: QRAGModel) -> None:
    lc = InMemoryVectorStore.from_documents(documents(), DeterministicFakeEmbedding(size=32))
    with pytest.raises(IndexMismatchError, match=r"QRAGRetriever\.adopt\("):
        in_place(model, lc)
    index = VectorStoreIndex(nodes(), embed_model=MockEmbedding(embed_dim=32))
    with pytest.raises(
        IndexMismatchError, match=r"another embedding model.*QRAGRetriever\.adopt\("
    ):
        in_place(model, index)


def test_derived_fields_follow_the_in_memory_rules() -> None:
    records = [
        Record("a", "one", {"source": "doc"}),
        Record("b", "two", {}),
        Record("c", "three", {"source": "doc"}, document="framework-doc"),
        Record("d", "four", {"source": "doc", "page": 2}),
        Record("e", "", {"source": ""}),
    ]
    view = derive(records, "fp", "here")
    assert [(c.id, c.doc_id, c.order) for c in view.chunks] == [
        ("a", "doc", 0),
        ("b", "b", 0),
        ("c", "framework-doc", 0),
        ("d", "doc", 1),
        ("e", "e", 0),
    ]
    # documents ranked by id in natural order: b < doc < e < framework-doc
    assert view.keys.tolist() == [[1, 0], [0, 0], [3, 0], [1, 1], [2, 0]]
    assert view.doc_info("doc") == (1, 2) and view.doc_info("nope") is None
    assert view.chunks[3].metadata == {"source": "doc", "page": 2}
    assert [c.doc_id for c in derive(records, "fp", "here", document_key=None).chunks][:2] == [
        "a",
        "b",
    ]


def test_qrag_written_points_keep_their_fields_beside_derived_ones(model: QRAGModel) -> None:
    store = InMemoryVectorStore(embedding=QRAGEmbeddings(model))
    store.add_documents(
        [Document(id="f1", page_content="mary went home", metadata={"source": "s"})]
    )
    source = LangChainMemorySource(store, model)
    ingest(source, model, ["john went home"], ids=["q1"], doc_ids=["s"])
    ingest(source, model, ["sandra went out"], ids=["q2"], doc_ids=["other"], orders=[7])
    assert [(c.id, c.doc_id, c.order) for c in source.get(["f1", "q1", "q2"])] == [
        ("f1", "s", 0),
        ("q1", "s", 1),
        ("q2", "other", 7),
    ]
    assert "qrag_order" not in source.get(["q2"])[0].metadata
