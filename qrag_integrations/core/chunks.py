"""What an index holds and a search reads: chunks, snapshots of an index, metadata filters, and
a structure kept per snapshot (:class:`BuiltFor`: the FAISS, compact-scan and BM25 indexes and
the rotated copy the search keeps)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.filters import compile_filter

T = TypeVar("T")

#: A metadata filter: a mapping in the language of :mod:`~qrag_integrations.core.filters`
#: (``{"key": value}``, ``{"key": [v1, v2]}``, operator dicts, ``$and`` / ``$or`` / ``$not``) or a
#: callable on a chunk's metadata.
MetadataFilter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable unit."""

    id: str
    """Unique id of the chunk."""
    text: str
    """Chunk text."""
    metadata: dict[str, Any]
    """User metadata (JSON-serialisable to be saved)."""
    doc_id: str
    """Id of the document the chunk comes from."""
    order: int
    """Position of the chunk inside its document."""


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of the index used by one search."""

    chunks: tuple[Chunk, ...]
    embeddings: torch.Tensor
    """``(N, D)`` unrotated chunk embeddings, rows in document order."""

    def __len__(self) -> int:
        return len(self.chunks)

    def rows_matching(self, filter: MetadataFilter | None) -> np.ndarray | None:
        """Rows (ascending, so still in document order) whose metadata pass ``filter``; ``None``
        means all rows."""
        if filter is None:
            return None
        test = compile_filter(filter)
        return np.fromiter(
            (i for i, c in enumerate(self.chunks) if test(c.metadata)), dtype=np.int64
        )


def mapping_filter(filter: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """The test a filter mapping stands for (the language of :mod:`~qrag_integrations.core.filters`,
    parsed and checked once): the one definition every search path (in-memory and store-backed)
    checks chunks with.

    Raises:
        QRAGError: ``filter`` is not a mapping, or not a filter (unknown operator, bad operand).
    """
    if not isinstance(filter, Mapping):
        raise QRAGError(f"filter must be a mapping or a callable, got {type(filter).__name__}")
    return compile_filter(filter)


def document_sort_key(doc_id: str) -> tuple[tuple[int, int | str], ...]:
    """The key documents are ordered by in an index: their ids in natural order ("ch2" before
    "ch10"), so the order of documents, and with it every pick, never depends on the order in
    which they were added."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"(\d+)", doc_id)
        if part
    )


def derived_chunk_ids(
    texts: Sequence[str],
    doc_ids: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[str]:
    """Stable chunk ids for chunks given none: a hash of each chunk's document (``None``: its own),
    text and metadata, so the same chunk gets the same id whenever and in whatever order it is
    added; repeats within one call get ``-2``, ``-3``... in their order."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for i, (text, doc) in enumerate(zip(texts, doc_ids)):
        meta = metadatas[i] if metadatas is not None else None
        blob = json.dumps([doc, text, meta or {}], sort_keys=True, default=str)
        base = "c-" + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


class BuiltFor:
    """One structure built from a tensor on first use and rebuilt when asked for another tensor
    (thread-safe): the FAISS, compact-scan and BM25 indexes over a snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (weak reference to the tensor it was built from, structure): a weakref cannot be
        # confused with a later tensor the way a reused id() could.
        self._built: tuple[weakref.ref, Any] | None = None

    def get(self, key: torch.Tensor, build: Callable[[], T]) -> T:
        """The structure built for ``key``; ``build()`` makes it when ``key`` is new."""
        with self._lock:
            if self._built is not None and self._built[0]() is key:
                return self._built[1]
            value = build()
            self._built = (weakref.ref(key), value)
            return value
