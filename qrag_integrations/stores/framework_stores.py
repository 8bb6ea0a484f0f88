"""LangChain's ``InMemoryVectorStore`` and LlamaIndex's ``SimpleVectorStore`` (alone or in a
``VectorStoreIndex``) as store-backed search sources, through their own APIs.

A store filled the framework's own way (``InMemoryVectorStore.from_documents(docs,
QRAGEmbeddings(model))``, ``VectorStoreIndex(nodes, embed_model=QRAGLlamaEmbedding(model))``) is
searched as it is: chunk ids, documents and order are derived as the in-memory index derives them
(:mod:`~qrag_integrations.stores.derived`). Chunks a Q-RAG ingest wrote carry the ``qrag_*`` fields
of :mod:`~qrag_integrations.stores.rows`. A LangChain store embeds what it is given with its own
embedding model, so it must be built with this checkpoint's
:class:`~qrag_integrations.frameworks.embeddings.QRAGEmbeddings`; a LlamaIndex ``SimpleVectorStore``
stores no text: the Q-RAG ingest keeps it in the ``qrag_text`` metadata key, a
``VectorStoreIndex`` in its docstore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import VectorStoreQuery

from qrag_integrations.core.chunks import Chunk, mapping_filter
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.conversion import as_filter
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings
from qrag_integrations.stores.derived import Record, StoreView, derive, written_by_qrag
from qrag_integrations.stores.rows import (
    ADOPT_HINT,
    RESERVED_KEYS,
    SortedKeys,
    StoredRow,
    check_dim,
    model_fingerprint,
)
from qrag_integrations.stores.search import StoreCandidates

#: Metadata key holding the text in a LlamaIndex ``SimpleVectorStore`` (which stores none).
KEY_TEXT = "qrag_text"
#: Keys LlamaIndex adds to every node's stored metadata.
LLAMA_KEYS = ("_node_type", "document_id", "doc_id", "ref_doc_id", KEY_TEXT)


def view_layout(view: StoreView, rows: Sequence[int]) -> SortedKeys:
    """The document order of the chunks at ``rows`` of ``view``."""
    chunks = [view.chunks[r] for r in rows]
    return SortedKeys(
        view.keys[list(rows)].reshape(-1, 2),
        [c.doc_id for c in chunks],
        [c.id for c in chunks],
        [c.text for c in chunks],
    )


def view_candidates(view: StoreView, ids: Sequence[str], vectors: np.ndarray) -> StoreCandidates:
    """The candidates ``ids`` (with their ``vectors``) of ``view``.

    Raises:
        QRAGError: the store returned a chunk the view does not hold (changed during a search).
    """
    rows = view.rows(ids)
    if len(rows) != len(ids):
        raise QRAGError(
            "the store returned a chunk it did not hold (was it changed during the search?)"
        )
    return StoreCandidates([view.chunks[r] for r in rows], vectors, view.keys[rows].reshape(-1, 2))


class _Viewed:
    """A source whose chunks are read through a :class:`StoreView`, rebuilt when the store changes."""

    fingerprint: str
    document_key: str | None
    _where: str
    _cache: tuple[tuple[int, ...], StoreView] | None = None

    def _stamp(self) -> tuple[int, ...]:
        """Changes whenever the store's points do (identity of each stored record, in order)."""
        raise NotImplementedError

    def _records(self) -> list[Record]:
        raise NotImplementedError

    def view(self) -> StoreView:
        """The store's chunks and keys (rebuilt only when the store changed)."""
        stamp, cached = self._stamp(), self._cache
        if cached is None or cached[0] != stamp:
            cached = self._cache = (
                stamp,
                derive(self._records(), self.fingerprint, self._where, self.document_key),
            )
        return cached[1]

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (unknown ids skipped)."""
        view = self.view()
        return [view.chunks[r] for r in view.rows(list(ids))]

    def chunks_of_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Ids of every stored chunk of these documents."""
        wanted = set(doc_ids)
        return [c.id for c in self.view().chunks if c.doc_id in wanted]

    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a stored document."""
        return self.view().doc_info(doc_id)

    def next_doc_rank(self) -> int:
        """The number of stored documents (documents are ranked by id when read)."""
        return len(self.view().doc_rank)


def memory_store_records(store: InMemoryVectorStore) -> list[Record]:
    """The documents of an ``InMemoryVectorStore`` as records, in the order they were added."""
    return [Record(i, r["text"], r["metadata"]) for i, r in store.store.items()]


class LangChainMemorySource(_Viewed):
    """A LangChain ``InMemoryVectorStore`` built with :class:`QRAGEmbeddings` of this checkpoint,
    filled by a Q-RAG ingest or the LangChain way.

    Filters: a filter mapping (:mod:`~qrag_integrations.core.filters`) or LlamaIndex
    ``MetadataFilters``, applied by the store as a callable and checked again here, or LangChain's
    own ``Callable[[Document], bool]`` passed through.
    """

    def __init__(
        self, store: InMemoryVectorStore, model: QRAGModel, document_key: str | None = "source"
    ) -> None:
        """Wrap ``store`` for ``model``; ``document_key``: the metadata key naming a chunk's
        document where a framework wrote it (as the retriever's ``document_key``).

        Raises:
            IndexMismatchError: the store's embedding model is not this checkpoint's, or it holds
                vectors of another size or encoder.
        """
        self.store, self.embedding_dim = store, model.embedding_dim
        self.fingerprint, self.document_key = model_fingerprint(model), document_key
        self._where = "the LangChain InMemoryVectorStore"
        emb = store.embeddings
        if not isinstance(emb, QRAGEmbeddings) or emb.fingerprint != self.fingerprint:
            raise IndexMismatchError(
                f"{self._where} embeds with {type(emb).__name__}, not this checkpoint's chunk encoder: "
                f"build it with InMemoryVectorStore(embedding=QRAGEmbeddings(model)), or {ADOPT_HINT}"
            )
        first = next(iter(store.store.values()), None)
        if first is not None:
            check_dim(len(first["vector"]), self.embedding_dim, self._where)
            self.view()  # every Q-RAG point's encoder checked

    def _stamp(self) -> tuple[int, ...]:
        return tuple(map(id, self.store.store.values()))

    def _records(self) -> list[Record]:
        return memory_store_records(self.store)

    def _filter(self, filter: Any) -> Callable[[LCDocument], bool] | None:
        filter = as_filter(filter)
        if filter is None or (callable(filter) and not isinstance(filter, Mapping)):
            return filter
        if not isinstance(filter, Mapping):
            raise QRAGError(
                f"filter must be a mapping or a callable on a Document, got {type(filter).__name__}"
            )
        test = mapping_filter(filter)
        return lambda doc: test(doc.metadata)

    def _matching(self, filter: Any) -> list[int]:
        """Rows of the view whose stored document the filter admits."""
        test = self._filter(filter)
        view = self.view()
        if test is None:
            return list(range(len(view.chunks)))
        return [
            i
            for i, (key, r) in enumerate(self.store.store.items())
            if test(LCDocument(id=key, page_content=r["text"], metadata=r["metadata"]))
        ]

    def count(self, filter: Any = None) -> int:
        """Number of chunks matching ``filter``."""
        return len(self._matching(filter))

    def layout(self, filter: Any) -> SortedKeys:
        """Document order of the matching chunks."""
        return view_layout(self.view(), self._matching(filter))

    def candidates(self, vector: np.ndarray, k: int, filter: Any) -> StoreCandidates:
        """The store's ``k`` nearest matching chunks (its cosine similarity), each checked against
        the filter again here."""
        test = self._filter(filter)
        found = self.store.similarity_search_with_score_by_vector(
            np.asarray(vector, dtype=np.float32).tolist(), k=k, filter=test
        )
        docs = [doc for doc, _ in found if test is None or test(doc)]
        vectors = np.asarray([self.store.store[d.id]["vector"] for d in docs], dtype=np.float32)
        return view_candidates(
            self.view(), [d.id for d in docs], vectors.reshape(len(docs), self.embedding_dim)
        )

    def delete(self, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many were there."""
        found = self.existing(ids)
        if found:
            self.store.delete(found)
        return len(found)

    def existing(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` in the store."""
        return [d.id for d in self.store.get_by_ids(list(ids)) if d.id is not None]

    def write(
        self, rows: list[StoredRow], model: QRAGModel, batch_size: int, next_doc_rank: int
    ) -> None:
        """``add_documents``: the store embeds them with its :class:`QRAGEmbeddings`."""
        docs = [LCDocument(id=r.id, page_content=r.text, metadata=r.metadata) for r in rows]
        self.store.add_documents(docs, ids=[r.id for r in rows])


def same_vector(stored: Sequence[float], made: Sequence[float]) -> bool:
    """Whether a stored vector is (up to float noise) one the chunk encoder made."""
    a, b = np.asarray(stored, dtype=np.float64), np.asarray(made, dtype=np.float64)
    return a.shape == b.shape and bool(
        np.linalg.norm(a - b) <= 1e-3 * max(np.linalg.norm(b), 1e-12)
    )


def simple_store_records(store: SimpleVectorStore, docstore: Any = None) -> list[Record]:
    """The nodes of a ``SimpleVectorStore`` as records, in the order they were added: text in
    ``qrag_text`` where a Q-RAG ingest wrote the node, else from ``docstore``.

    Raises:
        IndexMismatchError: a node whose text neither holds.
    """
    out = []
    for node_id in store.data.embedding_dict:
        meta = dict(store.data.metadata_dict.get(node_id) or {})
        if written_by_qrag(meta):
            user = {k: v for k, v in meta.items() if k not in LLAMA_KEYS}
            out.append(Record(node_id, str(meta.get(KEY_TEXT, "")), user))
            continue
        node = None if docstore is None else docstore.get_node(node_id, raise_error=False)
        if node is None:
            raise IndexMismatchError(
                f"the LlamaIndex SimpleVectorStore holds node {node_id!r} but not its text (LlamaIndex "
                "keeps texts in the index's docstore): pass the VectorStoreIndex itself"
            )
        out.append(Record(node_id, node.get_content(), node.metadata, node.ref_doc_id))
    return out


class LlamaIndexSimpleSource(_Viewed):
    """A LlamaIndex ``SimpleVectorStore`` (its ``query``, ``get``, ``add``, ``delete_nodes``),
    filled by a Q-RAG ingest or by a ``VectorStoreIndex`` (whose docstore holds the texts).

    Filters: a filter mapping (:mod:`~qrag_integrations.core.filters`) or LlamaIndex
    ``MetadataFilters`` (in that meaning), checked in our code on every node's metadata; the
    store's query is then restricted to the matching node ids.
    """

    def __init__(
        self,
        store: SimpleVectorStore,
        model: QRAGModel,
        docstore: Any = None,
        document_key: str | None = "source",
    ) -> None:
        """Wrap ``store`` for ``model``.

        Args:
            store: the vector store.
            model: the Q-RAG model.
            docstore: the index's docstore (``VectorStoreIndex.docstore``), where the texts of
                nodes a ``VectorStoreIndex`` wrote are.
            document_key: the metadata key naming a node's document where it has no
                ``ref_doc_id`` (as the retriever's ``document_key``).

        Raises:
            IndexMismatchError: it holds vectors of another size or chunk encoder, or nodes whose
                texts it does not hold and no ``docstore`` is given.
        """
        self.store, self.embedding_dim = store, model.embedding_dim
        self.fingerprint, self.document_key = model_fingerprint(model), document_key
        self.docstore, self._model = docstore, model
        self._where = "the LlamaIndex SimpleVectorStore"
        first = next(iter(store.data.embedding_dict), None)
        if first is not None:
            check_dim(len(store.get(first)), self.embedding_dim, self._where)
            self.view()  # every Q-RAG node's encoder checked, every other node's text found
            self._check_framework_vectors()

    def _stamp(self) -> tuple[int, ...]:
        return tuple(map(id, self.store.data.embedding_dict.values()))

    def _stored_metadata(self, node_id: str) -> dict[str, Any]:
        return dict(self.store.data.metadata_dict.get(node_id) or {})

    def _records(self) -> list[Record]:
        return simple_store_records(self.store, self.docstore)

    def _check_framework_vectors(self) -> None:
        """A node a ``VectorStoreIndex`` wrote has no recorded encoder: embed the first one's
        content (as LlamaIndex embeds it, metadata included, or its text alone) and compare."""
        node_id = next(
            (
                i
                for i in self.store.data.embedding_dict
                if not written_by_qrag(self._stored_metadata(i))
            ),
            None,
        )
        if node_id is None:
            return
        node = self.docstore.get_node(node_id)  # there: the view found it
        contents = [node.get_content(MetadataMode.EMBED), node.get_content()]
        made = self._model.embed_chunks(contents).float().cpu().numpy()
        if not any(same_vector(self.store.get(node_id), m) for m in made):
            raise IndexMismatchError(
                f"{self._where} holds vectors another embedding model made (node {node_id!r}), not "
                f"this checkpoint's chunk encoder; {ADOPT_HINT}"
            )

    def _test(self, filter: Any) -> Callable[[Mapping[str, Any]], bool]:
        filter = as_filter(filter)
        if not isinstance(filter, Mapping):
            raise QRAGError(
                "a LlamaIndex store takes a filter mapping or MetadataFilters, not "
                f"{type(filter).__name__}"
            )
        return mapping_filter(filter)

    def _matching(self, filter: Any) -> list[int]:
        """Rows of the view whose metadata the filter admits."""
        test = None if filter is None else self._test(filter)  # refused even by an empty store
        chunks = self.view().chunks
        return [i for i, c in enumerate(chunks) if test is None or test(c.metadata)]

    def _query(self, vector: Sequence[float], k: int, filter: Any) -> list[str]:
        only = None
        if filter is not None:
            chunks = self.view().chunks
            only = [chunks[i].id for i in self._matching(filter)]
            if not only:
                return []
        query = VectorStoreQuery(query_embedding=list(vector), similarity_top_k=k, node_ids=only)
        return list(self.store.query(query).ids or [])

    def count(self, filter: Any = None) -> int:
        """Number of chunks matching ``filter``."""
        return len(self._matching(filter))

    def layout(self, filter: Any) -> SortedKeys:
        """Document order of the matching chunks."""
        return view_layout(self.view(), self._matching(filter))

    def candidates(self, vector: np.ndarray, k: int, filter: Any) -> StoreCandidates:
        """The store's ``k`` nearest matching chunks (its cosine similarity)."""
        ids = self._query(np.asarray(vector, dtype=np.float32).tolist(), k, filter)
        vectors = np.asarray([self.store.get(i) for i in ids], dtype=np.float32)
        return view_candidates(self.view(), ids, vectors.reshape(len(ids), self.embedding_dim))

    def delete(self, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many were there."""
        found = self.existing(ids)
        if found:
            self.store.delete_nodes(node_ids=found)
        return len(found)

    def existing(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` in the store."""
        return [i for i in ids if i in self.store.data.embedding_dict]

    def write(
        self, rows: list[StoredRow], model: QRAGModel, batch_size: int, next_doc_rank: int
    ) -> None:
        """Embed with the chunk encoder and ``add`` the nodes (text kept in ``qrag_text``)."""
        vectors = (
            model.embed_chunks([r.text for r in rows], batch_size=batch_size).float().cpu().tolist()
        )
        hidden = [*RESERVED_KEYS, KEY_TEXT]
        self.store.add(
            [
                TextNode(
                    id_=r.id,
                    text=r.text,
                    metadata={**r.metadata, KEY_TEXT: r.text},
                    embedding=v,
                    excluded_embed_metadata_keys=hidden,
                    excluded_llm_metadata_keys=hidden,
                )
                for r, v in zip(rows, vectors)
            ]
        )
