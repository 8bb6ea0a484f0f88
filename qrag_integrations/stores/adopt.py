"""Adopt a store whose vectors a Q-RAG search cannot read as they are (another embedding model,
Qdrant's cosine distance, which normalises vectors): read its texts and metadata, derive the
fields a Q-RAG search needs (:mod:`~qrag_integrations.stores.derived`) and embed the texts with
the chunk encoder into a new collection or store, through that store's own API.

Re-running the same call resumes: chunks already in the target are skipped, so a crash costs at
most the batch being written. Nothing is written to the store adopted.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from qrag_integrations.core.chunks import document_sort_key
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.progress import progress_bar
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings
from qrag_integrations.stores.corpus import open_store
from qrag_integrations.stores.derived import Record, derive, written_by_qrag
from qrag_integrations.stores.framework_stores import memory_store_records, simple_store_records
from qrag_integrations.stores.rows import (
    KEY_DOC_ID,
    KEY_DOC_RANK,
    KEY_FINGERPRINT,
    KEY_ID,
    KEY_ORDER,
    StoredRow,
    model_fingerprint,
)

#: Payload key of a LlamaIndex node serialised in a Qdrant point.
_LLAMA_NODE = "_node_content"
#: Metadata keys giving a chunk's offset in its document (LangChain splitters' ``add_start_index``).
_START_KEYS = ("start_index",)


@dataclass(frozen=True)
class Adopted:
    """What :func:`adopt` wrote, and where."""

    store: Any
    """The target store (a ``QdrantClient``, an ``InMemoryVectorStore``, a ``SimpleVectorStore``)."""
    collection_name: str | None
    """The target Qdrant collection (``None`` for other stores)."""
    written: int
    """Chunks embedded and written by this call."""
    skipped: int
    """Chunks already in the target (written by an earlier, interrupted call)."""


def adopt(
    store: Any,
    model: QRAGModel,
    collection_name: str | None = None,
    into: Any = None,
    into_collection: str | None = None,
    document_key: str | None = "source",
    batch_size: int = 64,
    write_batch: int = 512,
    show_progress: bool = True,
) -> Adopted:
    """Embed a store's texts with ``model``'s chunk encoder into a store a Q-RAG search reads.

    Args:
        store: the store to adopt: a ``QdrantClient`` (with ``collection_name``), a langchain-qdrant
            or llama-index ``QdrantVectorStore``, a LangChain ``InMemoryVectorStore``, a LlamaIndex
            ``VectorStoreIndex`` (texts from its docstore).
        model: the Q-RAG model.
        collection_name: the Qdrant collection to adopt when ``store`` is a client.
        into: the target: a ``QdrantClient`` (with ``into_collection``), an ``InMemoryVectorStore``
            built with :class:`~qrag_integrations.frameworks.embeddings.QRAGEmbeddings`, a
            ``SimpleVectorStore``. Default: a Qdrant source's client (collection
            ``<collection>-qrag``); a new ``InMemoryVectorStore`` / ``SimpleVectorStore`` for the
            others.
        into_collection: the target Qdrant collection (created if missing).
        document_key: the metadata key naming a chunk's document (as the retriever's).
        batch_size: texts per chunk-encoder batch.
        write_batch: chunks embedded and written per step (what a crash can cost).
        show_progress: progress over the chunks (a bar, or log lines where none can be drawn).

    Returns:
        The target and what was written; search it with ``from_store(adopted.store,
        collection_name=adopted.collection_name)``.

    Raises:
        QRAGError: an unsupported store, a point without text, the target is the store itself.
        IndexMismatchError: the target holds another checkpoint's vectors.
    """
    if batch_size < 1 or write_batch < 1:
        raise QRAGError(f"batch_size and write_batch must be >= 1, got {batch_size}, {write_batch}")
    client, name = qdrant_of(store, collection_name)
    if into is None:
        if client is not None:
            into, into_collection = client, into_collection or f"{name}-qrag"
        elif isinstance(store, InMemoryVectorStore):
            into = InMemoryVectorStore(embedding=QRAGEmbeddings(model, batch_size=batch_size))
        else:
            into = SimpleVectorStore()
    same = (into_collection or name) == name if into is client else into is store
    if same:
        raise QRAGError("adopt into a new collection or store, not the one adopted")
    records = read_records(store, collection_name)
    writer = open_store(into, model, into_collection, document_key=document_key)
    rows, documents = planned_rows(records, model_fingerprint(model), document_key)
    written = skipped = 0
    with progress_bar(len(rows), "adopting", "chunk", show_progress) as bar:
        for start in range(0, len(rows), write_batch):
            batch = rows[start : start + write_batch]
            there = set(writer.existing([r.id for r in batch]))
            todo = [r for r in batch if r.id not in there]
            if todo:
                writer.write(todo, model, batch_size, documents)
            written, skipped = written + len(todo), skipped + len(batch) - len(todo)
            bar.update(len(batch))
    return Adopted(into, into_collection, written, skipped)


def planned_rows(
    records: Sequence[Record], fingerprint: str, document_key: str | None
) -> tuple[list[StoredRow], int]:
    """The rows to write (Q-RAG fields derived, documents ranked by id), in document order, and
    the number of documents. Blank texts are left out with one warning, as the in-memory index
    leaves them out."""
    kept = [r for r in records if r.text.strip()]
    if len(kept) < len(records):
        warnings.warn(
            f"skipped {len(records) - len(kept)} blank chunk(s): nothing in them can be found",
            UserWarning,
            stacklevel=3,
        )
    view = derive(kept, None, "the store adopted", document_key)
    rows = []
    for chunk, (doc_rank, order) in zip(view.chunks, view.keys.tolist()):
        meta = {
            **chunk.metadata,
            KEY_ID: chunk.id,
            KEY_DOC_ID: chunk.doc_id,
            KEY_ORDER: order,
            KEY_DOC_RANK: doc_rank,
            KEY_FINGERPRINT: fingerprint,
        }
        rows.append(((doc_rank, order), StoredRow(chunk.id, chunk.text, meta)))
    rows.sort(key=lambda r: r[0])
    return [r for _, r in rows], len(view.doc_rank)


def qdrant_of(store: Any, collection_name: str | None = None) -> tuple[Any, str | None]:
    """The Qdrant client and collection of a Qdrant store (a client with ``collection_name``, a
    langchain-qdrant or llama-index ``QdrantVectorStore``, a ``VectorStoreIndex`` over one), or
    ``(None, None)``."""
    if isinstance(store, VectorStoreIndex):
        store = store.vector_store
    try:
        from qdrant_client import QdrantClient  # qdrant-client is optional
    except ImportError:  # pragma: no cover - depends on the install
        return None, None
    if isinstance(store, QdrantClient):
        return store, collection_name
    client, name = getattr(store, "client", None), getattr(store, "collection_name", None)
    if isinstance(client, QdrantClient) and isinstance(name, str):
        return client, name
    return None, None


def read_records(store: Any, collection_name: str | None = None) -> list[Record]:
    """Every point of a store as a :class:`~qrag_integrations.stores.derived.Record`, in the
    order its chunks came (a Qdrant collection keeps none: chunks by offset in their document,
    where their metadata gives one, then by id).

    Raises:
        QRAGError: an unsupported store, a missing collection, or a point without text.
    """
    if isinstance(store, VectorStoreIndex) and isinstance(store.vector_store, SimpleVectorStore):
        return simple_store_records(store.vector_store, store.docstore)
    if isinstance(store, InMemoryVectorStore):
        return memory_store_records(store)
    if isinstance(store, SimpleVectorStore):
        return simple_store_records(store, None)
    client, name = qdrant_of(store, collection_name)
    if client is None or name is None:
        raise QRAGError(
            f"cannot adopt {type(store).__name__}: pass a QdrantClient with collection_name=, a Qdrant "
            "vector store of langchain-qdrant / llama-index, a LangChain InMemoryVectorStore or a "
            "LlamaIndex VectorStoreIndex"
        )
    if not client.collection_exists(name):
        raise QRAGError(f"Qdrant collection {name!r} does not exist")
    if isinstance(store, VectorStoreIndex):
        store = store.vector_store
    content = getattr(store, "content_payload_key", "page_content")
    metadata = getattr(store, "metadata_payload_key", "metadata")
    return _qdrant_records(client, name, content, metadata)


def _qdrant_records(client: Any, name: str, content: str, metadata: str) -> list[Record]:
    from qrag_integrations.stores.qdrant_counts import scroll_all

    keyed = []
    for point in scroll_all(client, name, None, True):
        payload = point.payload or {}
        if _LLAMA_NODE in payload:
            node = metadata_dict_to_node(payload)
            record = Record(str(node.node_id), node.get_content(), node.metadata, node.ref_doc_id)
            start = node.start_char_idx
        else:
            text, meta = payload.get(content), payload.get(metadata) or {}
            if not isinstance(text, str) or not isinstance(meta, Mapping):
                raise QRAGError(
                    f"Qdrant point {point.id} of {name!r} has no text under {content!r} (or its "
                    f"metadata under {metadata!r} is not a mapping)"
                )
            own = str(meta[KEY_ID]) if written_by_qrag(meta) else str(point.id)
            record = Record(own, text, meta)
            start = meta.get(KEY_ORDER) if written_by_qrag(meta) else _start(meta)
        keyed.append(((start is None, start or 0, document_sort_key(record.id)), record))
    keyed.sort(key=lambda r: r[0])
    return [r for _, r in keyed]


def _start(metadata: Mapping[str, Any]) -> int | None:
    value = next((metadata[k] for k in _START_KEYS if k in metadata), None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
