"""QRAGRetriever.from_store: the retriever over a vector store answers as the in-memory one."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore
from qdrant_client import QdrantClient, models
from search_reference import with_config

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings
from qrag_integrations.frameworks.retriever import QRAGRetriever

TEXTS = [
    "mary went to the kitchen",
    "john picked up the apple",
    "sandra moved to the garden",
    "daniel dropped the milk there",
    "mary travelled to the office",
    "john gave the apple to mary",
]
DOCS = [
    Document(page_content=f"the football is in the {p}", metadata={"room": p}, id=f"f-{p}")
    for p in ("hallway", "bedroom", "garden")
]
QUESTION = "where is the apple"


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir), position_mode=PositionMode.RELATIVE, relative_step=4
    )
    return QRAGModel.from_base(cfg).eval()


def store_of(kind: str, model: QRAGModel):
    if kind == "qdrant":
        return {"store": QdrantClient(":memory:"), "collection_name": "facts"}
    if kind == "langchain":
        return {"store": InMemoryVectorStore(embedding=QRAGEmbeddings(model))}
    return {"store": SimpleVectorStore()}


def filled(retriever: QRAGRetriever) -> QRAGRetriever:
    retriever.add_texts(
        TEXTS,
        metadatas=[{"n": i} for i in range(len(TEXTS))],
        ids=[f"t{i}" for i in range(len(TEXTS))],
    )
    retriever.add_documents(DOCS)
    return retriever


def docs(result: list[Document]) -> list[tuple]:
    return [
        (
            d.id,
            d.page_content,
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.metadata.items()},
        )
        for d in result
    ]


#: The model's own search rules (BM25 fusion, restatements), loose enough to change picks here.
RULES = {"lexical_depth": 4, "lexical_steps": 1, "lexical_gap": 0.5, "supersede_margin": 1e6}


@pytest.mark.parametrize("kind", ["qdrant", "langchain", "llama_index"])
@pytest.mark.parametrize("rules", [False, True])
def test_store_retriever_answers_as_the_in_memory_one(
    model: QRAGModel, kind: str, rules: bool
) -> None:
    if rules:  # the same search rules run over the store
        model = with_config(model, **RULES)
    memory = filled(QRAGRetriever(model=model, k=4))
    store = filled(
        QRAGRetriever.from_store(
            model=model, k=4, candidates_per_step=len(TEXTS) + 3, **store_of(kind, model)
        )
    )
    assert store.is_store_backed and not memory.is_store_backed and len(store) == len(memory) == 9
    assert docs(store.invoke(QUESTION)) == docs(memory.invoke(QUESTION))
    assert docs(store.invoke(QUESTION, k=2, filter={"room": ["garden", "bedroom"]})) == docs(
        memory.invoke(QUESTION, k=2, filter={"room": ["garden", "bedroom"]})
    )
    assert [docs(r) for r in store.batch([QUESTION, "who"])] == [
        docs(r) for r in memory.batch([QUESTION, "who"])
    ]
    assert docs(asyncio.run(store.ainvoke(QUESTION))) == docs(memory.invoke(QUESTION))
    nodes = store.retrieve(QUESTION)
    assert [n.node.node_id for n in nodes] == [d.id for d in memory.invoke(QUESTION)]
    assert [d.id for d in store.get_by_ids(["t1", "nope", "f-garden"])] == ["t1", "f-garden"]
    assert store.delete(["t1", "nope"]) and not store.delete(["nope"])
    memory.delete(["t1"])
    assert len(store) == 8 and docs(store.invoke(QUESTION)) == docs(memory.invoke(QUESTION))
    assert store.stats.steps > 0 and store.stats.exact_checked == 0


def test_store_retriever_refuses_index_and_save(model: QRAGModel, tmp_path: Path) -> None:
    retriever = QRAGRetriever.from_store(model=model, store=SimpleVectorStore())
    with pytest.raises(QRAGError, match="no in-memory index"):
        _ = retriever.index
    with pytest.raises(QRAGError, match="persist the store"):
        retriever.save(tmp_path / "r")
    with pytest.raises(QRAGError, match="unsupported store"):
        QRAGRetriever.from_store(model=model, store=object())
    with pytest.raises(QRAGError, match="collection_name"):
        QRAGRetriever.from_store(model=model, store=QdrantClient(":memory:"))
    for option in ({"scan": "int8"}, {"rescore": 5}):
        with pytest.raises(QRAGError, match="in-memory index's scan"):
            QRAGRetriever.from_store(model=model, **store_of("langchain", model), **option)


def test_search_rules_apply_to_a_store(model: QRAGModel) -> None:
    """The rules' options are the search's, on every path: a store takes them as memory does."""
    ruled = with_config(model, **RULES)
    for option in ({"lexical_depth": 0}, {"lexical_steps": 2}, {"lexical_gap": 0.0}):
        for supersede in (False, None):
            kwargs = {**option, "supersede": supersede, "k": 4}
            store = filled(
                QRAGRetriever.from_store(model=ruled, **store_of("langchain", ruled), **kwargs)
            )
            memory = filled(QRAGRetriever(model=ruled, **kwargs))
            assert store.policy == memory.policy
            assert docs(store.invoke(QUESTION)) == docs(memory.invoke(QUESTION))


def test_store_only_options_are_refused_without_a_store(model: QRAGModel) -> None:
    """One retriever class: options that only a store-backed search uses name the fix."""
    for option in (
        {"candidates_per_step": 8},
        {"check_exact": True},
        {"collection_name": "x"},
        {"rank_by": "count"},
    ):
        with pytest.raises(QRAGError, match="applies to a store-backed retriever"):
            QRAGRetriever(model=model, **option)
    memory = QRAGRetriever(model=model)
    with pytest.raises(QRAGError, match="no store source"):
        _ = memory.source
    with pytest.raises(QRAGError, match="in-memory index"):
        _ = memory.stats
    with pytest.raises(QRAGError, match="takes no index= or texts="):
        QRAGRetriever(model=model, store=SimpleVectorStore(), texts=["a"])


def test_the_old_store_retriever_name_is_a_deprecated_alias() -> None:
    import qrag_integrations

    with pytest.warns(DeprecationWarning, match="from_store"):
        alias = qrag_integrations.QRAGStoreRetriever
    assert alias is QRAGRetriever


def test_from_qdrant_checks_exact_picks(model: QRAGModel, tmp_path: Path) -> None:
    retriever = filled(
        QRAGRetriever.from_qdrant(
            "facts",
            path=str(tmp_path / "q"),
            model=model,
            k=3,
            candidates_per_step=2,
            check_exact=True,
        )
    )
    retriever.invoke(QUESTION)
    stats = retriever.stats
    assert stats.steps == stats.exact_checked == 3 and stats.candidates <= 6
    assert 0.0 <= stats.exact_rate <= 1.0


def test_qdrant_vector_stores_of_both_frameworks_are_accepted(model: QRAGModel) -> None:
    from langchain_qdrant import QdrantVectorStore as LCQdrant
    from llama_index.vector_stores.qdrant import QdrantVectorStore as LIQdrant

    client = QdrantClient(":memory:")
    first = filled(
        QRAGRetriever.from_store(model=model, store=client, collection_name="facts", k=3)
    )
    want = docs(first.invoke(QUESTION))
    lc = LCQdrant(
        client=client,
        collection_name="facts",
        embedding=QRAGEmbeddings(model),
        distance=models.Distance.DOT,
    )
    assert docs(QRAGRetriever.from_store(model=model, store=lc, k=3).invoke(QUESTION)) == want
    li = LIQdrant(collection_name="facts", client=client)
    assert docs(QRAGRetriever.from_store(model=model, store=li, k=3).invoke(QUESTION)) == want
    # the framework's own store reads the points Q-RAG wrote
    found = lc.similarity_search(QUESTION, k=1)[0]  # no source named: its own document
    assert found.metadata["qrag_doc_id"] == found.metadata["qrag_id"]


def test_store_of_another_checkpoint_is_refused(model: QRAGModel, tiny_bert_dir_48: Path) -> None:
    client = QdrantClient(":memory:")
    filled(QRAGRetriever.from_store(model=model, store=client, collection_name="facts"))
    small = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir_48))).eval()
    with pytest.raises(IndexMismatchError, match="48-dimensional"):
        QRAGRetriever.from_store(model=small, store=client, collection_name="facts")
    with pytest.raises(IndexMismatchError, match="not this checkpoint's chunk encoder"):
        QRAGRetriever.from_store(
            model=model, store=InMemoryVectorStore(embedding=QRAGEmbeddings(small))
        )


def test_from_qdrant_on_a_folder_held_by_another_client_names_it(
    model: QRAGModel, tmp_path: Path
) -> None:
    folder = str(tmp_path / "qdrant-data")
    holder = QdrantClient(path=folder)  # local mode allows one client per folder
    try:
        with pytest.raises(QRAGError, match=f"^Qdrant at {re.escape(folder)}: "):
            QRAGRetriever.from_qdrant("facts", path=folder, model=model)
    finally:
        holder.close()


def test_from_qdrant_refuses_url_and_path_together(model: QRAGModel, tmp_path: Path) -> None:
    with pytest.raises(QRAGError, match="not both"):
        QRAGRetriever.from_qdrant(
            "facts", url="http://localhost:6333", path=str(tmp_path / "q"), model=model
        )


@pytest.mark.parametrize("kind", ["qdrant", "langchain", "llama_index"])
def test_delete_takes_document_ids_over_every_store(model: QRAGModel, kind: str) -> None:
    """``delete([doc_id])`` removes every chunk of that document from the store, as in memory."""
    for retriever in (
        QRAGRetriever(model=model, k=3),
        QRAGRetriever.from_store(model=model, k=3, **store_of(kind, model)),
    ):
        retriever.add_texts(TEXTS[:3], doc_id="story")
        retriever.add_texts(TEXTS[3:], metadatas=[{"source": "notes"}] * len(TEXTS[3:]))
        assert retriever.delete(["story"]) is True
        assert len(retriever) == len(TEXTS) - 3
        assert {d.metadata["qrag_doc_id"] for d in retriever.invoke(QUESTION)} == {"notes"}
