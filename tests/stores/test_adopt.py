"""QRAGRetriever.adopt: a store of another model's vectors (LangChain, LlamaIndex, Qdrant cosine
collections of langchain-qdrant and llama-index) is embedded anew with the chunk encoder and then
picks as the in-memory index; an interrupted adoption resumes where it stopped."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
import torch
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_qdrant import QdrantVectorStore as LangChainQdrant
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaQdrant
from qdrant_client import QdrantClient, models

from qrag_integrations.core import progress
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.retriever import QRAGRetriever
from qrag_integrations.stores.adopt import adopt
from qrag_integrations.stores.qdrant import QdrantSource

WORDS = "mary john sandra went moved to the kitchen garden office hallway apple milk football"
WORDS = WORDS.split()
SOURCES = ["story"] * 4 + [None] * 3 + ["notes"] * 3 + [None, "story", "notes", None]
#: (uuid id, text, source, offset in the source); Qdrant point ids must be UUIDs
CHUNKS = [
    (
        str(uuid.UUID(int=i + 1)),
        " ".join(WORDS[(5 * i + j) % len(WORDS)] for j in range(3 + i % 3)),
        src,
        10 * sum(s == src for s in SOURCES[:i]),
    )
    for i, src in enumerate(SOURCES)
]
QUESTIONS = ["where is the apple", "what did mary give to john", "who went to the garden"]


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir), position_mode=PositionMode.RELATIVE, relative_step=4
    )
    return QRAGModel.from_base(cfg).eval()


def documents(reverse: bool = False) -> list[Document]:
    """LangChain Documents with ids and, in a source, a ``start_index`` (the splitter's offset);
    ``reverse``: arriving last-first (a Qdrant collection keeps no order of arrival)."""
    docs = [
        Document(
            id=i,
            page_content=t,
            metadata={"n": n, **({"source": s, "start_index": o} if s else {})},
        )
        for n, (i, t, s, o) in enumerate(CHUNKS)
    ]
    return docs[::-1] if reverse else docs


def nodes() -> list[TextNode]:
    out = []
    for n, (i, t, s, o) in enumerate(CHUNKS):
        rel = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=s)} if s else {}
        out.append(
            TextNode(
                id_=i,
                text=t,
                metadata={"n": n},
                relationships=rel,
                start_char_idx=o,
                end_char_idx=o + 5,
            )
        )
    return out


def hits(retriever: QRAGRetriever, **kwargs) -> list[list[tuple]]:
    return [
        [(h.chunk.id, h.chunk.doc_id, h.chunk.order, h.position, round(h.q_value, 4)) for h in hs]
        for hs in retriever.search(QUESTIONS, **kwargs)
    ]


def adopted(model: QRAGModel, store, **kwargs) -> QRAGRetriever:
    return QRAGRetriever.adopt(
        store, model=model, k=5, candidates_per_step=len(CHUNKS), show_progress=False, **kwargs
    )


def test_a_langchain_store_of_another_model_is_adopted(model: QRAGModel) -> None:
    store = InMemoryVectorStore.from_documents(documents(), DeterministicFakeEmbedding(size=8))
    with pytest.raises(IndexMismatchError, match=r"QRAGRetriever\.adopt\(store"):
        QRAGRetriever.from_store(store, model=model)
    retriever = adopted(model, store)
    memory = QRAGRetriever.from_documents(documents(), model=model, k=5)
    assert hits(retriever) == hits(memory)
    assert hits(retriever, filter={"n": [1, 5, 9, 12]}, k=3) == hits(
        memory, filter={"n": [1, 5, 9, 12]}, k=3
    )
    assert len(store.store) == len(CHUNKS)  # the store adopted is only read
    assert retriever.source.get([CHUNKS[0][0]])[0].metadata == documents()[0].metadata


def test_a_vector_store_index_of_another_model_is_adopted(model: QRAGModel) -> None:
    index = VectorStoreIndex(nodes(), embed_model=MockEmbedding(embed_dim=8))
    retriever = adopted(model, index)
    assert hits(retriever) == hits(QRAGRetriever.from_nodes(nodes(), model=model, k=5))


@pytest.mark.parametrize("framework", ["langchain-qdrant", "llama-index"])
def test_cosine_qdrant_collections_of_both_frameworks_are_adopted(
    model: QRAGModel, framework: str
) -> None:
    if framework == "langchain-qdrant":  # arriving last-first: the order comes from start_index
        vector_store = LangChainQdrant.from_documents(
            documents(reverse=True),
            DeterministicFakeEmbedding(size=8),
            location=":memory:",
            collection_name="facts",
        )
        client = vector_store.client
        memory = QRAGRetriever.from_documents(documents(), model=model, k=5)
    else:
        client = QdrantClient(":memory:")
        vector_store = LlamaQdrant(client=client, collection_name="facts")
        VectorStoreIndex(
            nodes()[::-1],
            embed_model=MockEmbedding(embed_dim=8),
            storage_context=StorageContext.from_defaults(vector_store=vector_store),
        )
        memory = QRAGRetriever.from_nodes(nodes(), model=model, k=5)
    with pytest.raises(IndexMismatchError, match=r"QRAGRetriever\.adopt\(store"):
        QRAGRetriever.from_store(client, collection_name="facts", model=model)
    retriever = adopted(model, vector_store)
    assert hits(retriever) == hits(memory)
    assert retriever.source.collection_name == "facts-qrag"
    # a Q-RAG collection: the count layout (Qdrant counts over the written ranks) agrees
    counted = QRAGRetriever.from_store(
        client,
        collection_name="facts-qrag",
        model=model,
        k=5,
        rank_by="count",
        candidates_per_step=len(CHUNKS),
    )
    assert hits(counted) == hits(memory)


def test_an_interrupted_adoption_resumes(
    model: QRAGModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection(
        "plain", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
    )
    client.upsert(
        "plain",
        [
            models.PointStruct(
                id=i, vector=[0.1] * 8, payload={"page_content": t, "metadata": {"source": s or ""}}
            )
            for i, (_, t, s, _) in enumerate(CHUNKS)
        ],
    )
    calls = []
    write = QdrantSource.write

    def crash_on_the_third(self, rows, *args) -> None:
        calls.append(len(rows))
        if len(calls) == 3:
            raise KeyboardInterrupt
        write(self, rows, *args)

    monkeypatch.setattr(QdrantSource, "write", crash_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        adopt(client, model, collection_name="plain", write_batch=4, show_progress=False)
    monkeypatch.setattr(QdrantSource, "write", write)
    assert client.count("plain-qrag").count == 8
    monkeypatch.setattr(progress, "_drawable", lambda: True)  # a bar, as on a terminal
    done = adopt(client, model, collection_name="plain", write_batch=4)
    assert (done.written, done.skipped, done.collection_name) == (len(CHUNKS) - 8, 8, "plain-qrag")
    assert "adopting" in capsys.readouterr().err  # the progress bar
    again = adopt(client, model, collection_name="plain", show_progress=False)
    assert (again.written, again.skipped) == (0, len(CHUNKS))
    client.close()


def test_adopt_refuses_what_it_cannot_read(model: QRAGModel) -> None:
    client = QdrantClient(":memory:")
    with pytest.raises(QRAGError, match="'missing' does not exist"):
        adopt(client, model, collection_name="missing")
    with pytest.raises(QRAGError, match="cannot adopt dict"):
        adopt({}, model)
    client.create_collection(
        "bare", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
    )
    client.upsert("bare", [models.PointStruct(id=1, vector=[0.1] * 8, payload={"text": "x"})])
    with pytest.raises(QRAGError, match="no text under 'page_content'"):
        adopt(client, model, collection_name="bare")
    with pytest.raises(QRAGError, match="not the one adopted"):
        adopt(client, model, collection_name="bare", into=client, into_collection="bare")


def test_a_qrag_collection_of_another_checkpoint_is_adopted_with_its_fields(
    model: QRAGModel,
) -> None:
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.chunk_encoder.parameters():
            p.add_(0.01)
    client = QdrantClient(":memory:")
    old = QRAGRetriever.from_store(client, collection_name="facts", model=other)
    old.add_documents(documents(reverse=True))
    with pytest.raises(IndexMismatchError, match="another chunk encoder.*QRAGRetriever.adopt"):
        QRAGRetriever.from_store(client, collection_name="facts", model=model)
    retriever = adopted(model, client, collection_name="facts")
    # the recorded order (the order of arrival there) is kept, as an in-memory index keeps it
    memory = QRAGRetriever.from_documents(documents(reverse=True), model=model, k=5)
    assert hits(retriever) == hits(memory)
