"""The chunks one question searches, as the search loop sees them (:class:`CandidateSet`), and
the in-memory index's kind (:class:`IndexCandidates`: a snapshot's rows, all or those a filter
matched)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from qrag_integrations.core.chunks import Chunk, MetadataFilter, Snapshot
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.positions import document_positions, rotate_as
from qrag_integrations.core.scan import BuiltFor

if TYPE_CHECKING:
    from qrag_integrations.core.search import MultiStepSearcher


#: Rows rotated at a time when a snapshot is rotated for document positions.
ROTATION_BLOCK = 16384


def rotate_documents(emb: torch.Tensor, doc_ids: Sequence[str], config: QRAGConfig) -> torch.Tensor:
    """Embeddings of searched chunks (in document order) rotated by their fixed positions in
    document position mode: among the searched chunks of their document (with a filter, the
    matching ones form the document, as in relative mode and in a store-backed search); ``emb``
    itself (no copy) when every chunk sits at 0 (each its own document)."""
    return _rotated(emb, doc_ids, config)[0]


def _rotated(
    emb: torch.Tensor, doc_ids: Sequence[str], config: QRAGConfig
) -> tuple[torch.Tensor, np.ndarray]:
    positions = document_positions(doc_ids, config.relative_step, config.relative_span)
    if not positions.any():
        return emb, positions
    # in blocks into one new tensor: the rotation's float32 temporaries stay a block's size
    # (whole, they were ~7 times the embeddings at 400K chunks)
    out, at = torch.empty_like(emb), torch.from_numpy(positions).to(emb.device)
    for i in range(0, emb.shape[0], ROTATION_BLOCK):
        j = i + ROTATION_BLOCK
        out[i:j] = rotate_as(config, emb[i:j], at[i:j])
    return out, positions


class DocumentRotation:
    """The candidates a search scores: a snapshot's rows as they are, or in document position
    mode rotated by :func:`rotate_documents` (then the search proper runs as in mode none); the
    rotated copy of a whole snapshot is kept until its embeddings change (thread-safe)."""

    def __init__(self, config: QRAGConfig) -> None:
        self.config = config
        self._slot = BuiltFor()

    def candidates(
        self, snap: Snapshot, filter: MetadataFilter | None, keep: bool = True
    ) -> IndexCandidates:
        """The candidates of ``snap`` under ``filter``; ``keep=False``: a rotated copy is not kept
        (one of many indexes searched once)."""
        plain = IndexCandidates.of(snap, filter)
        if self.config.position_mode is not PositionMode.DOCUMENT:
            return plain
        if plain.rows is not None:
            ids = [snap.chunks[int(r)].doc_id for r in plain.rows]
            emb, fixed = _rotated(plain.emb, ids, self.config)
            return IndexCandidates(snap, plain.rows, emb, fixed)

        def build() -> tuple[Snapshot, np.ndarray]:
            emb, fixed = _rotated(snap.embeddings, [c.doc_id for c in snap.chunks], self.config)
            return Snapshot(snap.chunks, emb), fixed

        rotated, fixed = self._slot.get(snap.embeddings, build) if keep else build()
        return IndexCandidates(rotated, None, rotated.embeddings, fixed)


class CandidateSet(Protocol):
    """The chunks one question searches, as the search loop sees them: how many there are, the
    chunk at a document-order rank, and the best unpicked one for a state."""

    @property
    def n(self) -> int:
        """Number of chunks searched (positions are laid out over them)."""

    def chunk(self, rank: int) -> Chunk:
        """The chunk at this document-order rank (at least every picked one)."""

    def best(
        self, searcher: MultiStepSearcher, state: torch.Tensor, picked: list[int]
    ) -> tuple[int, float, int] | None:
        """``(rank, Q-value, position)`` of the pick for ``state`` given the ranks ``picked``;
        ``None`` when no chunk the question may get is left (its search ends)."""


@dataclass(frozen=True)
class IndexCandidates:
    """The chunks one question searches: a snapshot's rows (all, or those a filter matched)."""

    snap: Snapshot
    rows: np.ndarray | None
    """Snapshot rows of the candidates in document order; ``None`` = every row."""
    emb: torch.Tensor
    """Their embeddings, row ``r`` = candidate rank ``r``."""
    fixed: np.ndarray | None = None
    """Document position mode: each candidate's fixed position, by which ``emb`` is already
    rotated (the search scores at position 0; a hit reports this one)."""

    @classmethod
    def of(cls, snap: Snapshot, filter: MetadataFilter | None) -> IndexCandidates:
        rows = snap.rows_matching(filter)
        emb = (
            snap.embeddings
            if rows is None
            else snap.embeddings[torch.from_numpy(rows).to(snap.embeddings.device)]
        )
        return cls(snap, rows, emb)

    @property
    def n(self) -> int:
        return int(self.emb.shape[0])

    def chunk(self, rank: int) -> Chunk:
        return self.snap.chunks[rank if self.rows is None else int(self.rows[rank])]

    def position(self, rank: int, searched: int) -> int:
        """The position a hit on ``rank`` reports: its fixed one, else the one it was scored at."""
        return searched if self.fixed is None else int(self.fixed[rank])

    def best(
        self, searcher: MultiStepSearcher, state: torch.Tensor, picked: list[int]
    ) -> tuple[int, float, int]:
        """The exact arg-max ``(rank, Q, position)`` over every unpicked candidate."""
        return searcher._best_one(self.emb, state, picked, self.n)
