"""Writing a stream cache's shards to a vector store (Qdrant) shard by shard.

The shards (:func:`qrag_integrations.ingest.sharded.read_shards`) hold ids and embeddings; the store
also needs each chunk's text and document, which come from the corpus read again, in the same
order: each shard's texts are checked against the SHA-256 its manifest recorded, so a corpus
that does not line up with the cache is refused before anything of that shard is written.
Shards whose ids are all in the store already are skipped, so an interrupted write continues.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from qrag_integrations.ingest.sharded import CorpusChangedError, Shard, texts_digest
from qrag_integrations.stores.rows import KEY_DOC_ID, KEY_DOC_RANK, KEY_ORDER, StoredRow, plan_rows


class VectorWriter(Protocol):
    """What :func:`write_shards` needs (:class:`~qrag_integrations.stores.qdrant.QdrantSource` has it)."""

    fingerprint: str
    """The chunk encoder's fingerprint."""

    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a stored document, or ``None``."""

    def next_doc_rank(self) -> int:
        """Rank the next new document gets."""

    def existing(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` already in the store."""

    def write_vectors(self, rows: list[StoredRow], vectors: np.ndarray, next_doc_rank: int) -> None:
        """Upsert rows with precomputed vectors."""


def write_shards(
    writer: VectorWriter,
    shards: Iterable[Shard],
    texts: Iterable[str],
    doc_ids: Iterable[str] | None = None,
) -> int:
    """Write every shard's chunks to ``writer`` with their texts; returns the rows written now.

    Args:
        writer: the store (e.g. ``QdrantSource(client, "corpus", model)``).
        shards: from :func:`~qrag_integrations.ingest.sharded.read_shards` (one shard in memory at a time).
        texts: the corpus that was embedded, in the same order (read lazily, again).
        doc_ids: document of each chunk, read alongside (positions are laid out per document, in
            document order); default: the whole corpus is one document. On a resumed write pass
            the same ``doc_ids`` (the default document is found again through the first row).

    Raises:
        CorpusChangedError: the texts do not match a shard's recorded hash (nothing of that shard
            is written).
    """
    rows_iter = iter(texts)
    docs_iter = iter(doc_ids) if doc_ids is not None else None
    default_doc: str | None = None
    known: dict[
        str, tuple[int, int]
    ] = {}  # (doc rank, next order) of documents written by this call
    written = 0
    for shard in shards:
        piece = list(itertools.islice(rows_iter, len(shard.ids)))
        docs = list(itertools.islice(docs_iter, len(piece))) if docs_iter is not None else None
        if texts_digest(piece) != shard.texts_sha256:
            raise CorpusChangedError(
                f"the texts at corpus rows {shard.start}-{shard.start + len(shard.ids) - 1} are not those "
                f"embedded in {shard.path}"
            )
        if docs is None:
            if default_doc is None:
                first = writer.existing(shard.ids[:1])
                default_doc = _doc_of(writer, first[0]) if first else f"doc-{uuid.uuid4().hex}"
            docs = [default_doc] * len(piece)
        if len(writer.existing(shard.ids)) == len(shard.ids):
            known.clear()  # written by an earlier, interrupted call: ask the store from now on
            continue
        rows, next_rank = plan_rows(
            piece,
            writer.fingerprint,
            lambda d: known.get(d) or writer.doc_info(d),
            writer.next_doc_rank(),
            ids=shard.ids,
            doc_ids=docs,
        )
        writer.write_vectors(rows, shard.embeddings.numpy(), next_rank)
        for row in rows:  # documents continue in the next shard without a store query
            meta = row.metadata
            rank, order = int(meta[KEY_DOC_RANK]), int(meta[KEY_ORDER])
            known[meta[KEY_DOC_ID]] = (
                rank,
                max(order + 1, known.get(meta[KEY_DOC_ID], (rank, 0))[1]),
            )
        written += len(rows)
    return written


def _doc_of(writer: VectorWriter, chunk_id: str) -> str:
    """The document id of a stored chunk (through the store's ``get``)."""
    get = getattr(writer, "get", None)
    if get is None:
        raise TypeError("resuming a write with the default document needs a store with get(ids)")
    return str(get([chunk_id])[0].doc_id)
