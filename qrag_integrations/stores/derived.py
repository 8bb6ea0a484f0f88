"""Q-RAG's fields of stored chunks, read where a Q-RAG ingest wrote them and derived where a
framework wrote the store its own way (``InMemoryVectorStore.from_documents``, a LlamaIndex
``VectorStoreIndex``, ``langchain-qdrant``).

The rules are the in-memory index's (:func:`~qrag_integrations.frameworks.conversion.chunk_identities`):
a chunk's id is the store's id; its document is the framework's document (a LlamaIndex node's
``ref_doc_id``), else ``metadata[document_key]``, else the chunk alone (named by its id); chunks
of a document are in the order they come (a store's order of insertion), each after the ones
before it, as :meth:`~qrag_integrations.core.index.ChunkIndex.add` numbers them; documents are
ranked by id in natural order (:func:`~qrag_integrations.core.chunks.document_sort_key`). A point
that holds every ``qrag_*`` field keeps its recorded id, document and order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qrag_integrations.core.chunks import Chunk, document_sort_key
from qrag_integrations.frameworks.conversion import chunk_identities, document_of
from qrag_integrations.stores.rows import KEY_FINGERPRINT, RESERVED_KEYS, row_chunk


@dataclass(frozen=True)
class Record:
    """One stored point as its store gives it."""

    id: str
    """The store's id of the point."""
    text: str
    """Its text."""
    metadata: Mapping[str, Any]
    """Its metadata as stored (the user's keys; the ``qrag_*`` keys if a Q-RAG ingest wrote it)."""
    document: str | None = None
    """The framework's document of the point (a LlamaIndex node's ``ref_doc_id``), if any."""


def written_by_qrag(metadata: Mapping[str, Any]) -> bool:
    """Whether stored metadata holds every ``qrag_*`` field (a Q-RAG ingest wrote the point)."""
    return all(k in metadata for k in RESERVED_KEYS)


@dataclass
class StoreView:
    """The chunks of a store with their document-order keys ``(doc_rank, order)``, documents
    ranked by id in natural order; rows in the order the records came."""

    chunks: list[Chunk]
    """The chunks (id, text, user metadata, document, order)."""
    keys: np.ndarray
    """``(N, 2)`` int64 keys ``(document rank by id, order)``."""
    row_of: dict[str, int] = field(default_factory=dict)
    """Row of each chunk id."""
    doc_rank: dict[str, int] = field(default_factory=dict)
    """Rank of each document."""

    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a document, or ``None`` when the store holds none of it."""
        if doc_id not in self.doc_rank:
            return None
        orders = [c.order for c in self.chunks if c.doc_id == doc_id]
        return self.doc_rank[doc_id], max(orders) + 1

    def rows(self, ids: Sequence[str]) -> list[int]:
        """Rows of the chunk ids the store holds (others left out), in the given order."""
        return [self.row_of[i] for i in ids if i in self.row_of]


def derive(
    records: Sequence[Record],
    fingerprint: str | None,
    where: str,
    document_key: str | None = "source",
) -> StoreView:
    """Every record's chunk and key (see the module docstring).

    Args:
        records: the store's points, in the order they came.
        fingerprint: the chunk encoder that must have written the records a Q-RAG ingest wrote
            (``None``: any, as when a store is adopted).
        where: the store, for errors.
        document_key: the metadata key naming a chunk's document.

    Raises:
        IndexMismatchError: a record written by a Q-RAG ingest of another chunk encoder.
    """
    ours = [written_by_qrag(r.metadata) for r in records]
    loose = [r for r, own in zip(records, ours) if not own]
    meta = [{k: v for k, v in r.metadata.items() if k not in RESERVED_KEYS} for r in loose]
    groups = [r.document or document_of(m, document_key, None) for r, m in zip(loose, meta)]
    ids, docs = chunk_identities([r.text for r in loose], groups, meta, [r.id for r in loose])
    derived = iter(zip(ids, docs, meta))
    next_order: dict[str, int] = {}
    chunks = []
    for record, own in zip(records, ours):
        if own:
            wanted = str(record.metadata[KEY_FINGERPRINT]) if fingerprint is None else fingerprint
            chunk = row_chunk(record.text, record.metadata, wanted, where)[0]
        else:
            chunk_id, doc_id, user = next(derived)
            chunk = Chunk(chunk_id, record.text, user, doc_id, next_order.get(doc_id, 0))
        next_order[chunk.doc_id] = max(next_order.get(chunk.doc_id, 0), chunk.order + 1)
        chunks.append(chunk)
    ranked = sorted(next_order, key=lambda d: (document_sort_key(d), d))
    doc_rank = {d: r for r, d in enumerate(ranked)}
    keys = np.asarray([(doc_rank[c.doc_id], c.order) for c in chunks], dtype=np.int64)
    return StoreView(chunks, keys.reshape(-1, 2), {c.id: i for i, c in enumerate(chunks)}, doc_rank)
