"""A Qdrant collection as a store-backed search source, through ``qdrant-client``.

The same code runs on embedded local mode (``QdrantClient(":memory:")`` or ``path=``) and on a
server (``QdrantClient(url=...)``). Points are ``{"page_content": text, "metadata": {...}}``
(the layout ``langchain-qdrant`` reads) with the ``qrag_*`` fields of
:mod:`~qrag_integrations.stores.rows` inside ``metadata``; the collection uses dot-product distance
(Qdrant would normalise cosine vectors, changing the Q-values) and records the chunk encoder's
fingerprint and the embedding size in its metadata. Needs ``pip install qdrant-client``.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from qrag_integrations.core.chunks import Chunk
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.filters import compile_filter, parse_filter
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.stores.qdrant_counts import CONTENT, PAGE, CountLayout, scroll_all
from qrag_integrations.stores.qdrant_filters import METADATA, metadata_field, qdrant_filter
from qrag_integrations.stores.rows import (
    ADOPT_HINT,
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

#: Collection metadata keys.
META_FINGERPRINT, META_DIM, META_NEXT_DOC_RANK = (
    "qrag_fingerprint",
    "qrag_embedding_dim",
    "qrag_next_doc_rank",
)
#: Collection metadata key counting Q-RAG writes and deletes (a cached document order is reused
#: while it and the point count are unchanged).
META_GENERATION = "qrag_generation"
#: Filters whose document order a source keeps.
_CACHED_LAYOUTS = 8
_ID_NAMESPACE = uuid.UUID("5b0f8a52-53c4-4f59-9a43-1f3f0c1ad0a1")


def connect(url: str | None = None, path: str | None = None) -> QdrantClient:
    """A ``QdrantClient`` for a server at ``url``, local files at ``path``, or in memory (neither).

    Raises:
        QRAGError: both given, or the local folder is held by another client (Qdrant's local
            mode allows one client per folder).
    """
    if url and path:
        raise QRAGError("give a Qdrant url or a local path, not both")
    if url:
        return QdrantClient(url=url)
    try:
        return QdrantClient(path=path) if path else QdrantClient(":memory:")
    except RuntimeError as exc:  # local mode: the folder is locked by another client
        raise QRAGError(f"Qdrant at {path}: {exc}") from exc


def point_id(chunk_id: str) -> str:
    """The Qdrant point id of a chunk id (a UUID derived from it; the chunk id stays in the payload)."""
    return str(uuid.uuid5(_ID_NAMESPACE, chunk_id))


class QdrantSource:
    """A Qdrant collection written by a Q-RAG ingest: :class:`~qrag_integrations.stores.search.CandidateSource`
    and :class:`~qrag_integrations.stores.rows.StoreWriter`."""

    def __init__(
        self,
        client: QdrantClient,
        collection_name: str,
        model: QRAGModel,
        create: bool = True,
        rank_by: str = "auto",
    ) -> None:
        """Open (or create) a collection for ``model``.

        Args:
            client: a ``QdrantClient`` (local mode or server).
            collection_name: the collection.
            model: the Q-RAG model whose chunk encoder writes / wrote it.
            create: create a missing collection (dot distance, this model's size and fingerprint).
            rank_by: how document-order ranks are read: ``"scroll"`` reads the matching chunks'
                order keys once per search, ``"count"`` asks one count per candidate (fast on a
                server with payload indexes), ``"auto"``: scroll up to 100,000 chunks.

        Raises:
            IndexMismatchError: the collection's vectors are not this checkpoint's (size,
                distance, recorded fingerprint, or points without one).
            QRAGError: the collection is missing and ``create`` is false, or a bad ``rank_by``.
        """
        if rank_by not in ("auto", "scroll", "count"):
            raise QRAGError(f"rank_by must be auto, scroll or count, got {rank_by!r}")
        self.client, self.collection_name, self.rank_by = client, collection_name, rank_by
        self.embedding_dim = model.embedding_dim
        self.fingerprint = model_fingerprint(model)
        self._where = f"Qdrant collection {collection_name!r}"
        self._layouts: dict[str, tuple[tuple[int, int, int], SortedKeys]] = {}
        if not client.collection_exists(collection_name):
            if not create:
                raise QRAGError(f"{self._where} does not exist")
            self._create()
        self._check()

    # -- the collection -------------------------------------------------------------------------
    def _create(self) -> None:
        self.client.create_collection(
            self.collection_name,
            vectors_config=models.VectorParams(
                size=self.embedding_dim, distance=models.Distance.DOT
            ),
            metadata={
                META_FINGERPRINT: self.fingerprint,
                META_DIM: self.embedding_dim,
                META_NEXT_DOC_RANK: 0,
            },
        )
        schema = {
            KEY_DOC_ID: models.PayloadSchemaType.KEYWORD,
            KEY_DOC_RANK: models.PayloadSchemaType.INTEGER,
            KEY_ORDER: models.PayloadSchemaType.INTEGER,
        }
        with warnings.catch_warnings():  # local mode: "payload indexes have no effect"
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            for key, kind in schema.items():
                self.client.create_payload_index(self.collection_name, metadata_field(key), kind)

    def _metadata(self) -> dict[str, Any]:
        return dict(self.client.get_collection(self.collection_name).config.metadata or {})

    def _check(self) -> None:
        info = self.client.get_collection(self.collection_name)
        params = info.config.params.vectors
        if not isinstance(params, models.VectorParams):
            raise IndexMismatchError(
                f"{self._where} has named vectors {sorted(params or {})}; Q-RAG writes one unnamed vector: {ADOPT_HINT}"
            )
        check_dim(params.size, self.embedding_dim, self._where)
        if params.distance != models.Distance.DOT:
            raise IndexMismatchError(
                f"{self._where} uses {params.distance.value} distance; Q-RAG needs Dot (Qdrant normalises "
                f"cosine vectors, which changes the Q-values): {ADOPT_HINT}"
            )
        recorded = (info.config.metadata or {}).get(META_FINGERPRINT)
        if recorded is None and (info.points_count or 0) > 0:
            raise IndexMismatchError(
                f"{self._where} was not written by a Q-RAG ingest (no recorded fingerprint): {ADOPT_HINT}"
            )
        if recorded is not None and recorded != self.fingerprint:
            raise IndexMismatchError(
                f"{self._where} holds vectors of another chunk encoder (fingerprint {str(recorded)[:12]}..., "
                f"this model's {self.fingerprint[:12]}...); {ADOPT_HINT}"
            )
        if recorded is None:
            self.client.update_collection(
                self.collection_name,
                metadata={META_FINGERPRINT: self.fingerprint, META_DIM: self.embedding_dim},
            )

    # -- reading --------------------------------------------------------------------------------
    def _chunk(self, payload: Mapping[str, Any] | None) -> tuple[Chunk, tuple[int, int]]:
        payload = payload or {}
        return row_chunk(
            str(payload.get(CONTENT, "")),
            dict(payload.get(METADATA) or {}),
            self.fingerprint,
            self._where,
        )

    def count(self, filter: Any = None) -> int:
        """Number of chunks matching ``filter`` (a filter mapping: as our code checks it)."""
        if isinstance(filter, Mapping):
            return self.layout(filter).n
        return self._count(qdrant_filter(filter))

    def _count(self, native: models.Filter | None) -> int:
        """Number of chunks Qdrant matches with ``native``."""
        return int(self.client.count(self.collection_name, count_filter=native, exact=True).count)

    def candidates(self, vector: np.ndarray, k: int, filter: Any) -> StoreCandidates:
        """The ``k`` matching chunks of highest inner product with ``vector``."""
        points = self.client.query_points(
            self.collection_name,
            query=np.asarray(vector, dtype=np.float32).tolist(),
            limit=k,
            query_filter=qdrant_filter(filter),
            with_payload=True,
            with_vectors=True,
        ).points
        rows = [self._chunk(p.payload) for p in points]
        vectors = np.asarray([p.vector for p in points], dtype=np.float32).reshape(
            len(points), self.embedding_dim
        )
        keys = np.asarray([key for _, key in rows], dtype=np.int64).reshape(-1, 2)
        return StoreCandidates([c for c, _ in rows], vectors, keys)

    def _scroll(self, filter: models.Filter | None, fields: list[str] | bool) -> list[Any]:
        return scroll_all(self.client, self.collection_name, filter, fields)

    def layout(self, filter: Any) -> SortedKeys | CountLayout:
        """Document order of the matching chunks (see ``rank_by``). A scrolled order holds the
        chunks a filter mapping matches as our code checks it; a count layout, those the filter
        pushed down to Qdrant matches. A scrolled order is kept per filter and reused while the
        collection's point count and Q-RAG write generation are unchanged (writes that bypass the
        Q-RAG ingest and keep the count are not seen)."""
        native = qdrant_filter(filter)
        n = self._count(native)
        if self.rank_by == "count" or (self.rank_by == "auto" and n > 100_000):
            return CountLayout(self.client, self.collection_name, native, n)
        stamp = (int(self._metadata().get(META_GENERATION, 0)), self._count(None), n)
        mine = isinstance(filter, Mapping)
        if mine:
            key = f"ours:{parse_filter(filter)!r}"
        else:
            key = "" if native is None else native.model_dump_json()
        cached = self._layouts.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        fields = [metadata_field(k) for k in (KEY_DOC_RANK, KEY_ORDER, KEY_DOC_ID, KEY_ID)]
        payloads = [
            p.payload or {}
            for p in self._scroll(native, [CONTENT, *([METADATA] if mine else fields)])
        ]
        if mine:  # Qdrant may have matched more: keep what the filter matches
            test = compile_filter(filter)
            payloads = [
                p
                for p in payloads
                if test(
                    {k: v for k, v in (p.get(METADATA) or {}).items() if k not in RESERVED_KEYS}
                )
            ]
        meta = [p.get(METADATA) or {} for p in payloads]
        if any(
            any(k not in m for k in (KEY_DOC_RANK, KEY_ORDER, KEY_DOC_ID, KEY_ID)) for m in meta
        ):
            raise IndexMismatchError(
                f"{self._where} holds points without Q-RAG order fields (written outside the Q-RAG ingest)"
            )
        layout = SortedKeys(
            [(int(m[KEY_DOC_RANK]), int(m[KEY_ORDER])) for m in meta],
            [m[KEY_DOC_ID] for m in meta],
            [str(m[KEY_ID]) for m in meta],
            [str(p.get(CONTENT, "")) for p in payloads],
        )
        if len(self._layouts) >= _CACHED_LAYOUTS:
            self._layouts.pop(next(iter(self._layouts)))
        self._layouts[key] = (stamp, layout)
        return layout

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (unknown ids skipped), in the given order."""
        points = self.client.retrieve(
            self.collection_name, [point_id(i) for i in ids], with_payload=True
        )
        by_id = {c.id: c for c, _ in (self._chunk(p.payload) for p in points)}
        return [by_id[i] for i in ids if i in by_id]

    def chunks_of_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Ids of every stored chunk of these documents."""
        if not doc_ids:
            return []
        match = models.Filter(
            must=[
                models.FieldCondition(
                    key=metadata_field(KEY_DOC_ID), match=models.MatchAny(any=list(doc_ids))
                )
            ]
        )
        return [str((p.payload or {})[METADATA][KEY_ID]) for p in self._scroll(match, True)]

    def delete(self, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many were there."""
        found = self.existing(ids)
        if found:
            self.client.delete(
                self.collection_name,
                models.PointIdsList(points=[point_id(i) for i in found]),
                wait=True,
            )
            self._bump({})
        return len(found)

    # -- writing (StoreWriter) ------------------------------------------------------------------
    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a stored document."""
        match = models.Filter(
            must=[
                models.FieldCondition(
                    key=metadata_field(KEY_DOC_ID), match=models.MatchValue(value=doc_id)
                )
            ]
        )
        points = self._scroll(match, [metadata_field(KEY_DOC_RANK), metadata_field(KEY_ORDER)])
        if not points:
            return None
        meta = [(p.payload or {})[METADATA] for p in points]
        return int(meta[0][KEY_DOC_RANK]), max(int(m[KEY_ORDER]) for m in meta) + 1

    def next_doc_rank(self) -> int:
        """From the collection metadata."""
        return int(self._metadata().get(META_NEXT_DOC_RANK, 0))

    def existing(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` in the collection."""
        points = self.client.retrieve(
            self.collection_name, [point_id(i) for i in ids], with_payload=False
        )
        there = {str(p.id) for p in points}
        return [i for i in ids if point_id(i) in there]

    def write(
        self, rows: list[StoredRow], model: QRAGModel, batch_size: int, next_doc_rank: int
    ) -> None:
        """Embed with the chunk encoder and upsert, then record the next document rank."""
        vectors = (
            model.embed_chunks([r.text for r in rows], batch_size=batch_size).float().cpu().numpy()
        )
        self.write_vectors(rows, vectors, next_doc_rank)

    def write_vectors(self, rows: list[StoredRow], vectors: np.ndarray, next_doc_rank: int) -> None:
        """Upsert rows (from :func:`~qrag_integrations.stores.rows.plan_rows`) with vectors already
        made by this model's chunk encoder (e.g. read from a cache; nothing checks them)."""
        if vectors.shape != (len(rows), self.embedding_dim):
            raise QRAGError(
                f"expected vectors of shape ({len(rows)}, {self.embedding_dim}), got {vectors.shape}"
            )
        for start in range(0, len(rows), PAGE):
            self.client.upsert(
                self.collection_name,
                points=[
                    models.PointStruct(
                        id=point_id(r.id),
                        vector=v.tolist(),
                        payload={CONTENT: r.text, METADATA: r.metadata},
                    )
                    for r, v in zip(rows[start : start + PAGE], vectors[start : start + PAGE])
                ],
                wait=True,
            )
        self._bump({META_NEXT_DOC_RANK: next_doc_rank})

    def _bump(self, metadata: dict[str, Any]) -> None:
        """Record a write: one more generation, plus ``metadata``."""
        generation = int(self._metadata().get(META_GENERATION, 0)) + 1
        self.client.update_collection(
            self.collection_name, metadata={**metadata, META_GENERATION: generation}
        )
