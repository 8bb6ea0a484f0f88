"""How chunks are laid out in a vector store (framework-free).

Every point a Q-RAG ingest writes carries, beside its vector and text, a metadata dict holding
the user's metadata and the reserved ``qrag_*`` keys below: the chunk id, its document id and
order, the document's rank (documents are ranked in the order they were first written, as in
:class:`~qrag_integrations.core.index.ChunkIndex`) and the fingerprint of the chunk encoder that made
the vector. ``(doc_rank, order)`` is the document-order key positions are laid out over.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from qrag_integrations.core import validation
from qrag_integrations.core.checkpoint import chunk_encoder_fingerprint
from qrag_integrations.core.chunks import Chunk, document_sort_key
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.positions import layout_positions

KEY_ID, KEY_DOC_ID, KEY_ORDER, KEY_DOC_RANK, KEY_FINGERPRINT = (
    "qrag_id",
    "qrag_doc_id",
    "qrag_order",
    "qrag_doc_rank",
    "qrag_fingerprint",
)
#: Metadata keys reserved for Q-RAG in stored points.
RESERVED_KEYS = (KEY_ID, KEY_DOC_ID, KEY_ORDER, KEY_DOC_RANK, KEY_FINGERPRINT)
#: How a store of other vectors becomes searchable (ends every refusal of such a store).
ADOPT_HINT = (
    "adopt it with QRAGRetriever.adopt(store, ...), which embeds its texts with this chunk "
    "encoder into a new collection or store (docs/stores.md)"
)


_FINGERPRINTS: weakref.WeakKeyDictionary[QRAGModel, str] = weakref.WeakKeyDictionary()


def model_fingerprint(model: QRAGModel) -> str:
    """The chunk encoder's fingerprint (hashed once per model object: a model must not be trained
    further while stores use it)."""
    if model not in _FINGERPRINTS:
        _FINGERPRINTS[model] = chunk_encoder_fingerprint(model)
    return _FINGERPRINTS[model]


@dataclass(frozen=True)
class StoredRow:
    """One chunk as it is written to a store."""

    id: str
    """Chunk id."""
    text: str
    """Chunk text."""
    metadata: dict[str, Any]
    """User metadata plus the reserved ``qrag_*`` keys."""


def check_user_metadata(metadata: Mapping[str, Any]) -> None:
    """Raise :class:`QRAGError` if user metadata uses a reserved ``qrag_*`` key."""
    clash = sorted(set(metadata) & set(RESERVED_KEYS))
    if clash:
        raise QRAGError(f"metadata keys {clash} are reserved for Q-RAG in stores")


def plan_rows(
    texts: Sequence[str],
    fingerprint: str,
    doc_info: Callable[[str], tuple[int, int] | None],
    next_doc_rank: int,
    metadatas: Sequence[Mapping[str, Any] | None] | None = None,
    ids: Sequence[str] | None = None,
    doc_ids: Sequence[str] | None = None,
    orders: Sequence[int] | None = None,
) -> tuple[list[StoredRow], int]:
    """The rows an ingest writes, with the document ranks and orders an index would give them.

    Args:
        texts: chunk texts.
        fingerprint: the chunk encoder's fingerprint.
        doc_info: ``(doc_rank, next order)`` of a document already in the store, or ``None``.
        next_doc_rank: the rank the next new document gets.
        metadatas: user metadata per chunk.
        ids: chunk ids (default random).
        doc_ids: document per chunk (default: one new document for the call).
        orders: order inside the document (default: after the document's stored chunks).

    Returns:
        The rows and the next free document rank.
    """
    n = len(texts)
    for name, seq in (
        ("metadatas", metadatas),
        ("ids", ids),
        ("doc_ids", doc_ids),
        ("orders", orders),
    ):
        if seq is not None and len(seq) != n:
            raise QRAGError(f"{name} has {len(seq)} entries for {n} texts")
    ids = [str(i) for i in ids] if ids is not None else [uuid.uuid4().hex for _ in range(n)]
    if len(set(ids)) != n:
        raise QRAGError("ids must be unique")
    doc_ids = [str(d) for d in doc_ids] if doc_ids is not None else [f"doc-{uuid.uuid4().hex}"] * n
    ranks: dict[str, int] = {}
    next_order: dict[str, int] = {}
    for d in dict.fromkeys(doc_ids):
        known = doc_info(d)
        if known is None:
            ranks[d], next_order[d], next_doc_rank = next_doc_rank, 0, next_doc_rank + 1
        else:
            ranks[d], next_order[d] = known
    rows = []
    for i, (text, d) in enumerate(zip(texts, doc_ids)):
        meta = dict(metadatas[i] or {}) if metadatas is not None else {}
        check_user_metadata(meta)
        order = int(orders[i]) if orders is not None else next_order[d]
        next_order[d] = max(next_order[d], order + 1)
        meta.update(
            {
                KEY_ID: ids[i],
                KEY_DOC_ID: d,
                KEY_ORDER: order,
                KEY_DOC_RANK: ranks[d],
                KEY_FINGERPRINT: fingerprint,
            }
        )
        rows.append(StoredRow(ids[i], text, meta))
    return rows, next_doc_rank


class StoreWriter(Protocol):
    """What :func:`ingest` needs from a store (each store adapter implements it)."""

    def doc_info(self, doc_id: str) -> tuple[int, int] | None:
        """``(doc_rank, next order)`` of a stored document, or ``None``."""

    def next_doc_rank(self) -> int:
        """Rank the next new document gets."""

    def existing(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` already in the store."""

    def write(
        self, rows: list[StoredRow], model: QRAGModel, batch_size: int, next_doc_rank: int
    ) -> None:
        """Embed the rows with the chunk encoder and write them through the store's own API."""


def ingest(
    writer: StoreWriter,
    model: QRAGModel,
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None = None,
    ids: Sequence[str] | None = None,
    doc_ids: Sequence[str] | None = None,
    orders: Sequence[int] | None = None,
    batch_size: int = 64,
) -> list[str]:
    """Embed chunks with ``model``'s chunk encoder and write them to a store, with their
    document-order fields and the encoder's fingerprint (arguments as :func:`plan_rows`).

    Returns:
        The chunk ids.

    Raises:
        QRAGError: bad texts or metadata, an id already in the store; nothing is written.
    """
    texts = validation.check_texts(texts)
    for i, text in enumerate(texts):
        validation.check_unicode(text, f"text {i}")
    if ids is not None:
        ids = validation.check_chunk_ids(ids)
    if metadatas is not None and any(
        m is not None and not isinstance(m, Mapping) for m in metadatas
    ):
        raise QRAGError("metadata must be a dict per text")
    rows, next_rank = plan_rows(
        texts,
        model_fingerprint(model),
        writer.doc_info,
        writer.next_doc_rank(),
        metadatas,
        ids,
        doc_ids,
        orders,
    )
    clash = writer.existing([r.id for r in rows])
    if clash:
        raise QRAGError(f"ids already in the store: {clash[:5]} (delete them first)")
    if rows:
        writer.write(rows, model, batch_size, next_rank)
    return [r.id for r in rows]


def row_chunk(
    text: str, metadata: Mapping[str, Any], fingerprint: str, where: str
) -> tuple[Chunk, tuple[int, int]]:
    """The chunk and document-order key of a stored point, its encoder checked.

    Raises:
        IndexMismatchError: the point was not written by a Q-RAG ingest of this chunk encoder.
    """
    missing = [k for k in RESERVED_KEYS if k not in metadata]
    if missing:
        raise IndexMismatchError(
            f"{where} holds a point without Q-RAG fields {missing}: write the store with the Q-RAG "
            "ingest (it records document order and the chunk encoder)"
        )
    if metadata[KEY_FINGERPRINT] != fingerprint:
        raise IndexMismatchError(
            f"{where} holds vectors of another chunk encoder (fingerprint "
            f"{str(metadata[KEY_FINGERPRINT])[:12]}..., this model's {fingerprint[:12]}...); {ADOPT_HINT}"
        )
    user = {k: v for k, v in metadata.items() if k not in RESERVED_KEYS}
    chunk = Chunk(
        str(metadata[KEY_ID]), text, user, str(metadata[KEY_DOC_ID]), int(metadata[KEY_ORDER])
    )
    return chunk, (int(metadata[KEY_DOC_RANK]), int(metadata[KEY_ORDER]))


def check_dim(dim: int, expected: int, where: str) -> None:
    """Refuse a store whose vectors are not ``expected``-dimensional."""
    if dim != expected:
        raise IndexMismatchError(
            f"{where} holds {dim}-dimensional vectors but this model makes {expected}-dimensional ones: "
            f"it was not written with this checkpoint's chunk encoder; {ADOPT_HINT}"
        )


def _given(values: list[str] | None, what: str, argument: str) -> list[str]:
    if values is None:
        raise QRAGError(f"this layout was built without {what} (pass {argument}= to SortedKeys)")
    return values


class SortedKeys:
    """A :class:`~qrag_integrations.stores.search.StoreLayout` from all the matching chunks' keys."""

    def __init__(
        self,
        keys: Sequence[tuple[int, int]] | np.ndarray,
        doc_ids: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
    ) -> None:
        """Sort ``keys`` ``(doc_rank, order)`` of every chunk the search covers; with their
        ``doc_ids``, documents are ranked by id (natural order) as an in-memory index ranks them,
        not by the stored rank (the order they were first written). ``ids`` and ``texts`` (aligned
        with ``keys``) are put in the same order, for :meth:`ids` and :meth:`texts`."""
        arr = np.asarray(keys, dtype=np.int64).reshape(-1, 2)
        for name, seq in (("doc_ids", doc_ids), ("ids", ids), ("texts", texts)):
            if seq is not None and len(seq) != len(arr):
                raise QRAGError(f"{name} has {len(seq)} entries for {len(arr)} keys")
        self._stored = self._ranked = np.zeros(0, dtype=np.int64)
        if doc_ids is not None and len(arr):
            pairs = dict(zip(arr[:, 0].tolist(), map(str, doc_ids)))
            by_id = sorted(pairs, key=lambda r: (document_sort_key(pairs[r]), r))
            self._stored = np.array(sorted(pairs), dtype=np.int64)
            rank_of = {r: i for i, r in enumerate(by_id)}
            self._ranked = np.array([rank_of[r] for r in self._stored.tolist()], dtype=np.int64)
            arr = self._by_id(arr)
        order = np.lexsort((arr[:, 1], arr[:, 0]))
        self.keys = arr[order]
        self._ids = None if ids is None else [str(ids[i]) for i in order.tolist()]
        self._texts = None if texts is None else [texts[i] for i in order.tolist()]

    def _by_id(self, keys: np.ndarray) -> np.ndarray:
        """``keys`` with each stored document rank replaced by its rank by id (when known)."""
        if not len(self._stored):
            return keys
        out = keys.copy()
        out[:, 0] = self._ranked[np.searchsorted(self._stored, keys[:, 0])]
        return out

    @property
    def n(self) -> int:
        """Number of chunks."""
        return len(self.keys)

    def ids(self) -> Sequence[str]:
        """Chunk ids of the chunks in rank order (rank ``i`` is ``ids()[i]``).

        Raises:
            QRAGError: the layout was built without ids.
        """
        return _given(self._ids, "chunk ids", "ids")

    def texts(self) -> Sequence[str]:
        """Texts of the chunks in rank order.

        Raises:
            QRAGError: the layout was built without texts.
        """
        return _given(self._texts, "texts", "texts")

    def ranks(self, keys: np.ndarray) -> np.ndarray:
        """How many of the chunks sort before each of ``keys`` ``(K, 2)``."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 2)
        if self.n == 0 or len(keys) == 0:
            return np.zeros(len(keys), dtype=np.int64)
        keys = self._by_id(keys)
        width = np.int64(max(int(self.keys[:, 1].max()), int(keys[:, 1].max())) + 1)
        flat = self.keys[:, 0] * width + self.keys[:, 1]
        return np.searchsorted(flat, keys[:, 0] * width + keys[:, 1], side="left").astype(np.int64)

    def document_spans(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(first rank, covered chunk count)`` of the document of each chunk at ``ranks``."""
        ranks = np.asarray(ranks, dtype=np.int64)
        if len(ranks) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        docs = self.keys[:, 0]
        first = np.searchsorted(docs, docs[ranks], side="left")
        return first, np.searchsorted(docs, docs[ranks], side="right") - first

    def document_positions(self, ranks: np.ndarray, step: int, span: float) -> np.ndarray:
        """Fixed positions (document position mode) of the chunks at ``ranks``: their order among
        the covered chunks of their document, by :func:`~qrag_integrations.core.positions.layout_positions`."""
        first, length = self.document_spans(ranks)
        return layout_positions(np.asarray(ranks, dtype=np.int64) - first, length, step, span)
