"""``QRAGStoreRetriever``: the Q-RAG retriever over a vector store, nothing copied into an index.

Build it with :meth:`QRAGRetriever.from_store <qrag_integrations.frameworks.retriever.QRAGRetriever.from_store>`
or :meth:`QRAGStoreRetriever.from_qdrant`. Searches run
:class:`~qrag_integrations.stores.search.StoreSearcher` (each step re-scores the store's
``candidates_per_step`` nearest chunks exactly); ``add_texts`` / ``add_documents`` embed with the
chunk encoder and write through the store's own API; ``delete`` and ``get_by_ids`` go to the store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore
from pydantic import Field, PrivateAttr

from qrag_integrations.frameworks.conversion import chunk_to_langchain
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.options import check_options
from qrag_integrations.frameworks.retriever import QRAGRetriever
from qrag_integrations.core.search import Hit
from qrag_integrations.stores.framework_stores import LangChainMemorySource, LlamaIndexSimpleSource
from qrag_integrations.stores.rows import ingest
from qrag_integrations.stores.search import StoreSearcher, StoreStats


def open_store(store: Any, model: QRAGModel, collection_name: str | None = None, rank_by: str = "auto") -> Any:
    """The store-backed search source of a store object.

    Args:
        store: a ``qdrant_client.QdrantClient`` (with ``collection_name``), a ``langchain_qdrant``
            or ``llama_index`` ``QdrantVectorStore`` (its client and collection), a LangChain
            ``InMemoryVectorStore`` built with :class:`~qrag_integrations.frameworks.embeddings.QRAGEmbeddings`,
            a LlamaIndex ``SimpleVectorStore``, or a ready source (``layout`` + ``candidates``).
        model: the Q-RAG model.
        collection_name: the Qdrant collection (created if missing) when ``store`` is a client.
        rank_by: Qdrant only: see :class:`~qrag_integrations.stores.qdrant.QdrantSource`.

    Raises:
        QRAGError: an unsupported store, or a client without ``collection_name``.
        IndexMismatchError: the store holds vectors of another checkpoint.
    """
    if isinstance(store, InMemoryVectorStore):
        return LangChainMemorySource(store, model)
    if isinstance(store, SimpleVectorStore):
        return LlamaIndexSimpleSource(store, model)
    if hasattr(store, "layout") and hasattr(store, "candidates"):
        return store
    try:
        from qdrant_client import QdrantClient
    except ImportError:  # pragma: no cover - depends on the install
        QdrantClient = None  # noqa: N806
    if QdrantClient is not None:
        from qrag_integrations.stores.qdrant import QdrantSource

        if isinstance(store, QdrantClient):
            if not collection_name:
                raise QRAGError("a QdrantClient needs collection_name=")
            return QdrantSource(store, collection_name, model, rank_by=rank_by)
        client, name = getattr(store, "client", None), getattr(store, "collection_name", None)
        if isinstance(client, QdrantClient) and isinstance(name, str):  # langchain-qdrant, llama-index qdrant
            return QdrantSource(client, name, model, rank_by=rank_by)
    raise QRAGError(
        f"unsupported store {type(store).__name__}: pass a QdrantClient (pip install qdrant-client), a Qdrant "
        "vector store of langchain-qdrant / llama-index, a LangChain InMemoryVectorStore or a LlamaIndex SimpleVectorStore"
    )


class QRAGStoreRetriever(QRAGRetriever):
    """:class:`~qrag_integrations.frameworks.retriever.QRAGRetriever` whose chunks live in a vector store.

    Usage:
        .. code-block:: python

            retriever = QRAGStoreRetriever.from_qdrant("facts", path="qdrant_data", checkpoint=ckpt, k=3)
            retriever.add_texts(texts, doc_id="story")          # embedded and written to Qdrant
            docs = retriever.invoke("Where is the football?")
    """

    candidates_per_step: int = Field(default=64, ge=1)
    """Chunks asked from the store per step and re-scored exactly (the search is exact whenever
    they hold the exact arg-max)."""
    check_exact: bool = False
    """Also score every matching chunk each step to count in :attr:`stats` how often the exact
    arg-max was among the candidates (costly: for evaluation)."""

    _init_keywords: ClassVar[frozenset[str]] = QRAGRetriever._init_keywords | {"store", "collection_name", "rank_by"}

    _source: Any = PrivateAttr()
    _store_searcher: StoreSearcher = PrivateAttr()

    def __init__(self, *, store: Any, collection_name: str | None = None, rank_by: str = "auto", **data: Any) -> None:
        """Open ``store`` (see :func:`open_store`) for the model of ``data`` (``model=`` or
        ``checkpoint=``); other fields as :class:`QRAGRetriever`'s."""
        super().__init__(**data)
        self._source = open_store(store, self._model, collection_name, rank_by)
        self._store_searcher = StoreSearcher(self._model, self._source, self.candidates_per_step, self.check_exact)

    @classmethod
    def from_qdrant(
        cls, collection_name: str, url: str | None = None, path: str | None = None, **kwargs: Any
    ) -> QRAGStoreRetriever:
        """Over a Qdrant collection: a server at ``url``, local files at ``path``, or in memory.

        Args:
            collection_name: the collection (created if missing).
            url: server URL (``http://localhost:6333``).
            path: folder of embedded local mode (``None`` with no ``url``: in memory).
            **kwargs: fields, ``checkpoint`` / ``model`` and ``rank_by``; an unknown name raises
                :class:`~qrag_integrations.core.errors.UnknownOptionError`.
        """
        from qrag_integrations.stores.qdrant import connect

        cls._refuse_unknown(kwargs, "from_qdrant")
        return cls(store=connect(url=url, path=path), collection_name=collection_name, **kwargs)

    @property
    def source(self) -> Any:
        """The store-backed search source."""
        return self._source

    @property
    def stats(self) -> StoreStats:
        """Counters of the searches so far (steps, candidates, exact arg-max found)."""
        return self._store_searcher.stats

    @property
    def index(self) -> ChunkIndex:
        """Not available: the chunks live in the store."""
        raise QRAGError("a store-backed retriever has no in-memory index; its chunks are in .source")

    def __len__(self) -> int:
        return self._source.count(None)

    def _add(self, texts: list[str], metas: Any, ids: Sequence[str] | None, doc_ids: list[str]) -> list[str]:
        return ingest(self._source, self._model, texts, metas, ids, doc_ids, batch_size=self.batch_size)

    def delete(self, ids: Sequence[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id from the store. Returns ``True`` if any was removed; ``kwargs``: none."""
        check_options(kwargs, ("ids",), f"{type(self).__name__}.delete")
        if ids is None:
            raise QRAGError("delete needs ids=[...]")
        return self._source.delete([ids] if isinstance(ids, str) else list(ids)) > 0

    def get_by_ids(self, ids: Sequence[str]) -> list[LCDocument]:
        """Documents of the given chunk ids (unknown ids skipped)."""
        return [chunk_to_langchain(c) for c in self._source.get(list(ids))]

    def _run_search(self, queries: list[str], k: int, stop_threshold: float | None, filter: Any) -> list[list[Hit]]:
        return self._store_searcher.search(queries, k, stop_threshold, filter)

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Not available: the store keeps the chunks (save or persist the store itself)."""
        raise QRAGError("a store-backed retriever keeps its chunks in the store: persist the store, then from_store() again")
