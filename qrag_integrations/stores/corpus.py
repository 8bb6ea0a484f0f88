"""A retriever's chunks in a vector store: :class:`StoreCorpus` (the store-backed
:class:`~qrag_integrations.core.corpus.Corpus`) and :func:`open_store`, which recognises a store.

Searches run :class:`~qrag_integrations.stores.search.StoreSearcher` (each step re-scores the
store's ``candidates_per_step`` nearest chunks exactly); adds embed with the chunk encoder and
write through the store's own API; deletes and gets go to the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.vector_stores import SimpleVectorStore

from qrag_integrations.core.chunks import Chunk
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import Hit
from qrag_integrations.stores.framework_stores import LangChainMemorySource, LlamaIndexSimpleSource
from qrag_integrations.stores.rows import ingest
from qrag_integrations.stores.search import StoreSearcher, StoreStats


def open_store(
    store: Any,
    model: QRAGModel,
    collection_name: str | None = None,
    rank_by: str = "auto",
    document_key: str | None = "source",
) -> Any:
    """The store-backed search source of a store object.

    Args:
        store: a ``qdrant_client.QdrantClient`` (with ``collection_name``), a ``langchain_qdrant``
            or ``llama_index`` ``QdrantVectorStore`` (its client and collection), a LangChain
            ``InMemoryVectorStore`` built with :class:`~qrag_integrations.frameworks.embeddings.QRAGEmbeddings`,
            a LlamaIndex ``VectorStoreIndex`` (its vector store, texts from its docstore) or
            ``SimpleVectorStore``, or a ready source (``layout`` + ``candidates``).
        model: the Q-RAG model.
        collection_name: the Qdrant collection (created if missing) when ``store`` is a client.
        rank_by: Qdrant only: see :class:`~qrag_integrations.stores.qdrant.QdrantSource`.
        document_key: the metadata key naming a chunk's document in a store a framework filled
            (:mod:`~qrag_integrations.stores.derived`).

    Raises:
        QRAGError: an unsupported store, or a client without ``collection_name``.
        IndexMismatchError: the store holds vectors of another checkpoint.
    """
    if isinstance(store, VectorStoreIndex):
        if isinstance(store.vector_store, SimpleVectorStore):
            return LlamaIndexSimpleSource(store.vector_store, model, store.docstore, document_key)
        store = store.vector_store  # a Qdrant store: the texts are in its points
    if isinstance(store, InMemoryVectorStore):
        return LangChainMemorySource(store, model, document_key)
    if isinstance(store, SimpleVectorStore):
        return LlamaIndexSimpleSource(store, model, document_key=document_key)
    if hasattr(store, "layout") and hasattr(store, "candidates"):
        return store
    try:
        from qdrant_client import QdrantClient
    except ImportError:  # pragma: no cover - depends on the install
        QdrantClient = None
    if QdrantClient is not None:
        from qrag_integrations.stores.qdrant import QdrantSource  # qdrant-client is optional

        if isinstance(store, QdrantClient):
            if not collection_name:
                raise QRAGError("a QdrantClient needs collection_name=")
            return QdrantSource(store, collection_name, model, rank_by=rank_by)
        client, name = getattr(store, "client", None), getattr(store, "collection_name", None)
        if isinstance(client, QdrantClient) and isinstance(
            name, str
        ):  # langchain-qdrant, llama-index qdrant
            return QdrantSource(client, name, model, rank_by=rank_by)
    raise QRAGError(
        f"unsupported store {type(store).__name__}: pass a QdrantClient (pip install qdrant-client), a Qdrant "
        "vector store of langchain-qdrant / llama-index, a LangChain InMemoryVectorStore, a LlamaIndex "
        "VectorStoreIndex or SimpleVectorStore"
    )


class StoreCorpus:
    """Chunks that live in a vector store, searched in place (nothing copied into an index).

    Args:
        model: the Q-RAG model whose chunk encoder wrote (or will write) the store's vectors.
        source: a store-backed source (:func:`open_store`).
        candidates_per_step: chunks asked from the store per step and re-scored exactly.
        check_exact: also score every matching chunk to count how often the exact arg-max was
            among the candidates (costly: for evaluation).
        policy: the search rules, as in memory (``None``: the model's checkpoint's).
        threads: threads of a search, as in memory (``SearchSettings.threads``).
    """

    def __init__(
        self,
        model: QRAGModel,
        source: Any,
        candidates_per_step: int = 64,
        check_exact: bool = False,
        policy: SearchPolicy | None = None,
        threads: int | None = None,
    ) -> None:
        self.model, self.source = model, source
        self.reconfigure(candidates_per_step, check_exact, policy, threads)

    def reconfigure(
        self,
        candidates_per_step: int,
        check_exact: bool,
        policy: SearchPolicy | None,
        threads: int | None,
    ) -> None:
        """Search with these settings (as the constructor's) from the next search on; the
        counters of :attr:`stats` start again."""
        self.searcher = StoreSearcher(
            self.model, self.source, candidates_per_step, check_exact, policy, threads
        )
        self.policy = self.searcher.policy

    @property
    def stats(self) -> StoreStats:
        """Counters of the searches so far (steps, candidates, exact arg-max found)."""
        return self.searcher.stats

    def __len__(self) -> int:
        return self.source.count(None)

    def add(
        self,
        texts: list[str],
        metadatas: Sequence[dict[str, Any]] | None,
        ids: Sequence[str] | None,
        doc_ids: list[str],
        batch_size: int,
        show_progress: bool,
        replace: bool = False,
    ) -> list[str]:
        # ``replace`` is not taken: the ingest refuses ids already in the store, whose document
        # order it could not re-plan without a second write
        return ingest(
            self.source, self.model, texts, metadatas, ids, doc_ids, batch_size=batch_size
        )

    def delete(self, ids: Sequence[str]) -> int:
        ids = list(ids)
        # a source of the user's own (any object with layout and candidates) may not list documents
        documents = getattr(self.source, "chunks_of_documents", None)
        return self.source.delete(ids + (documents(ids) if documents else []))

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        return self.source.get(list(ids))

    def search(
        self, queries: list[str], k: int, stop_threshold: float | None, filter: Any
    ) -> list[list[Hit]]:
        return self.searcher.search(queries, k, stop_threshold, filter)
