"""What an index holds and a search reads: chunks, snapshots of an index, metadata filters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.errors import QRAGError

#: A metadata filter: ``{"key": value}`` (equality), ``{"key": [v1, v2]}`` (any of), or a callable.
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
        test = filter if callable(filter) else mapping_filter(filter)
        return np.fromiter(
            (i for i, c in enumerate(self.chunks) if test(c.metadata)), dtype=np.int64
        )


def mapping_filter(filter: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """The test a ``{"key": value or [values]}`` filter stands for: every key present, its value
    equal to the value or to one of the values. The one definition every search path (in-memory
    and store-backed) checks chunks with.

    Raises:
        QRAGError: ``filter`` is not a mapping.
    """
    if not isinstance(filter, Mapping):
        raise QRAGError(f"filter must be a mapping or a callable, got {type(filter).__name__}")
    wanted = {
        k: (list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v])
        for k, v in filter.items()
    }

    def test(meta: Mapping[str, Any]) -> bool:
        return all(k in meta and meta[k] in values for k, values in wanted.items())

    return test
