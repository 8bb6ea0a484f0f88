"""LangChain's ``InMemoryVectorStore`` and LlamaIndex's ``SimpleVectorStore`` as store-backed
search sources, through their own APIs.

Each chunk's metadata holds the user's keys and the ``qrag_*`` fields of
:mod:`~qrag_integrations.stores.rows`. A LangChain store embeds what it is given with its own
embedding model, so it must be built with this checkpoint's
:class:`~qrag_integrations.frameworks.embeddings.QRAGEmbeddings`; a LlamaIndex ``SimpleVectorStore`` stores
no text, so the text is kept in the ``qrag_text`` metadata key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import VectorStoreQuery

from qrag_integrations.core.chunks import Chunk, mapping_filter
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings
from qrag_integrations.frameworks.filters import as_filter
from qrag_integrations.stores.rows import (
    KEY_DOC_ID,
    KEY_DOC_RANK,
    KEY_ID,
    KEY_ORDER,
    RESERVED_KEYS,
    SortedKeys,
    StoredRow,
    check_dim,
    model_fingerprint,
    row_chunk,
)
from qrag_integrations.stores.search import StoreCandidates

#: Metadata key holding the text in a LlamaIndex ``SimpleVectorStore`` (which stores none).
KEY_TEXT = "qrag_text"
#: Keys LlamaIndex adds to every node's stored metadata.
_LLAMA_KEYS = ("_node_type", "document_id", "doc_id", "ref_doc_id", KEY_TEXT)


def _keys_info(metas: list[Mapping[str, Any]], doc_id: str) -> tuple[int, int] | None:
    mine = [m for m in metas if m.get(KEY_DOC_ID) == doc_id]
    return (int(mine[0][KEY_DOC_RANK]), max(int(m[KEY_ORDER]) for m in mine) + 1) if mine else None


def _next_rank(metas: list[Mapping[str, Any]]) -> int:
    return max((int(m[KEY_DOC_RANK]) for m in metas if KEY_DOC_RANK in m), default=-1) + 1


class LangChainMemorySource:
    """A LangChain ``InMemoryVectorStore`` built with :class:`QRAGEmbeddings` of this checkpoint.

    Filters: a filter mapping (:mod:`~qrag_integrations.core.filters`) or LlamaIndex
    ``MetadataFilters``, applied by the store as a callable and checked again here, or LangChain's
    own ``Callable[[Document], bool]`` passed through.
    """

    def __init__(self, store: InMemoryVectorStore, model: QRAGModel) -> None:
        """Wrap ``store`` for ``model``.

        Raises:
            IndexMismatchError: the store's embedding model is not this checkpoint's, or it holds
                vectors of another size or encoder.
        """
        self.store, self.embedding_dim = store, model.embedding_dim
        self.fingerprint = model_fingerprint(model)
        self._where = "the LangChain InMemoryVectorStore"
        emb = store.embeddings
        if not isinstance(emb, QRAGEmbeddings) or emb.fingerprint != self.fingerprint:
            raise IndexMismatchError(
                f"{self._where} embeds with {type(emb).__name__}, not this checkpoint's chunk encoder: "
                "build it with InMemoryVectorStore(embedding=QRAGEmbeddings(model))"
            )
        first = next(iter(store.store.values()), None)
        if first is not None:
            check_dim(len(first["vector"]), self.embedding_dim, self._where)
            row_chunk(first["text"], first["metadata"], self.fingerprint, self._where)

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

    def _records(self, filter: Any) -> list[dict[str, Any]]:
        test = self._filter(filter)
        records = list(self.store.store.values())
        if test is None:
            return records
        return [
            r
            for r in records
            if test(LCDocument(id=r["id"], page_content=r["text"], metadata=r["metadata"]))
        ]

    def count(self, filter: Any = None) -> int:
        """Number of chunks matching ``filter``."""
        return len(self._records(filter))

    def layout(self, filter: Any) -> SortedKeys:
        """Document order of the matching chunks."""
        records = self._records(filter)
        return SortedKeys(
            [(int(r["metadata"][KEY_DOC_RANK]), int(r["metadata"][KEY_ORDER])) for r in records],
            [r["metadata"][KEY_DOC_ID] for r in records],
            [r["metadata"][KEY_ID] for r in records],
            [r["text"] for r in records],
        )

    def candidates(self, vector: np.ndarray, k: int, filter: Any) -> StoreCandidates:
        """The store's ``k`` nearest matching chunks (its cosine similarity), each checked against
        the filter again here."""
        test = self._filter(filter)
        found = self.store.similarity_search_with_score_by_vector(
            np.asarray(vector, dtype=np.float32).tolist(), k=k, filter=test
        )
        found = [(doc, score) for doc, score in found if test is None or test(doc)]
        rows = [
            row_chunk(doc.page_content, doc.metadata, self.fingerprint, self._where)
            for doc, _ in found
        ]
        vectors = np.asarray(
            [self.store.store[doc.id]["vector"] for doc, _ in found], dtype=np.float32
        )
        keys = np.asarray([key for _, key in rows], dtype=np.int64).reshape(-1, 2)
        return StoreCandidates(
            [c for c, _ in rows], vectors.reshape(len(rows), self.embedding_dim), keys
        )

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (unknown ids skipped)."""
        docs = {d.id: d for d in self.store.get_by_ids(list(ids))}
        return [
            row_chunk(docs[i].page_content, docs[i].metadata, self.fingerprint, self._where)[0]
            for i in ids
            if i in docs
        ]

    def chunks_of_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Ids of every stored chunk of these documents."""
        wanted = set(doc_ids)
        return [i for i, r in self.store.store.items() if r["metadata"].get(KEY_DOC_ID) in wanted]

    def delete(self, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many were there."""
        found = self.existing(ids)
        if found:
            self.store.delete(found)
        return len(found)

    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a stored document."""
        return _keys_info([r["metadata"] for r in self.store.store.values()], doc_id)

    def next_doc_rank(self) -> int:
        """One more than the highest stored document rank."""
        return _next_rank([r["metadata"] for r in self.store.store.values()])

    def existing(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` in the store."""
        return [d.id for d in self.store.get_by_ids(list(ids)) if d.id is not None]

    def write(
        self, rows: list[StoredRow], model: QRAGModel, batch_size: int, next_doc_rank: int
    ) -> None:
        """``add_documents``: the store embeds them with its :class:`QRAGEmbeddings`."""
        docs = [LCDocument(id=r.id, page_content=r.text, metadata=r.metadata) for r in rows]
        self.store.add_documents(docs, ids=[r.id for r in rows])


class LlamaIndexSimpleSource:
    """A LlamaIndex ``SimpleVectorStore`` (its ``query``, ``get``, ``add``, ``delete_nodes``).

    Filters: a filter mapping (:mod:`~qrag_integrations.core.filters`) or LlamaIndex
    ``MetadataFilters`` (in that meaning), checked in our code on every node's metadata; the
    store's query is then restricted to the matching node ids.
    """

    def __init__(self, store: SimpleVectorStore, model: QRAGModel) -> None:
        """Wrap ``store`` for ``model``.

        Raises:
            IndexMismatchError: it holds vectors of another size or chunk encoder.
        """
        self.store, self.embedding_dim = store, model.embedding_dim
        self.fingerprint = model_fingerprint(model)
        self._where = "the LlamaIndex SimpleVectorStore"
        first = next(iter(store.data.embedding_dict), None)
        if first is not None:
            check_dim(len(store.get(first)), self.embedding_dim, self._where)
            self._chunk(first)

    def _chunk(self, node_id: str) -> tuple[Chunk, tuple[int, int]]:
        meta = self.store.data.metadata_dict.get(node_id) or {}
        user = {k: v for k, v in meta.items() if k not in _LLAMA_KEYS}
        chunk, key = row_chunk(str(meta.get(KEY_TEXT, "")), user, self.fingerprint, self._where)
        return chunk, key

    def _test(self, filter: Any) -> Callable[[Mapping[str, Any]], bool]:
        filter = as_filter(filter)
        if not isinstance(filter, Mapping):
            raise QRAGError(
                "a LlamaIndex store takes a filter mapping or MetadataFilters, not "
                f"{type(filter).__name__}"
            )
        return mapping_filter(filter)

    def _user_metadata(self, node_id: str) -> dict[str, Any]:
        meta = self.store.data.metadata_dict.get(node_id) or {}
        return {k: v for k, v in meta.items() if k not in _LLAMA_KEYS and k not in RESERVED_KEYS}

    def _matching(self, filter: Any) -> list[str]:
        ids = list(self.store.data.embedding_dict)
        if filter is None:
            return ids
        test = self._test(filter)  # a bad filter is refused even by an empty store
        return [i for i in ids if test(self._user_metadata(i))]

    def _query(self, vector: Sequence[float], k: int, filter: Any) -> list[str]:
        only = None if filter is None else self._matching(filter)
        if only is not None and not only:
            return []
        query = VectorStoreQuery(query_embedding=list(vector), similarity_top_k=k, node_ids=only)
        return list(self.store.query(query).ids or [])

    def count(self, filter: Any = None) -> int:
        """Number of chunks matching ``filter``."""
        return len(self._matching(filter))

    def layout(self, filter: Any) -> SortedKeys:
        """Document order of the matching chunks."""
        rows = [self._chunk(i) for i in self._matching(filter)]
        return SortedKeys(
            [key for _, key in rows],
            [chunk.doc_id for chunk, _ in rows],
            [chunk.id for chunk, _ in rows],
            [chunk.text for chunk, _ in rows],
        )

    def candidates(self, vector: np.ndarray, k: int, filter: Any) -> StoreCandidates:
        """The store's ``k`` nearest matching chunks (its cosine similarity)."""
        ids = self._query(np.asarray(vector, dtype=np.float32).tolist(), k, filter)
        rows = [self._chunk(i) for i in ids]
        vectors = np.asarray([self.store.get(i) for i in ids], dtype=np.float32).reshape(
            len(ids), self.embedding_dim
        )
        keys = np.asarray([key for _, key in rows], dtype=np.int64).reshape(-1, 2)
        return StoreCandidates([c for c, _ in rows], vectors, keys)

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (unknown ids skipped)."""
        return [self._chunk(i)[0] for i in ids if i in self.store.data.embedding_dict]

    def chunks_of_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Ids of every stored chunk of these documents."""
        wanted = set(doc_ids)
        return [
            i for i, meta in self.store.data.metadata_dict.items() if meta.get(KEY_DOC_ID) in wanted
        ]

    def delete(self, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many were there."""
        found = self.existing(ids)
        if found:
            self.store.delete_nodes(node_ids=found)
        return len(found)

    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a stored document."""
        return _keys_info(list(self.store.data.metadata_dict.values()), doc_id)

    def next_doc_rank(self) -> int:
        """One more than the highest stored document rank."""
        return _next_rank(list(self.store.data.metadata_dict.values()))

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
