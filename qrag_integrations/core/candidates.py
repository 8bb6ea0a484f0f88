"""The in-memory index's candidates (:class:`IndexCandidates`: a snapshot's rows, all or those a
filter matched, a :class:`~qrag_integrations.core.step.CandidateSet`), as a search builds them
(:class:`DocumentRotation`: in document position modes with their fixed layout)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qrag_integrations.core.chunks import Chunk, MetadataFilter, Snapshot
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.positions import (
    DocumentLayout,
    Runs,
    document_runs,
    fixed_layout,
    layout_runs,
    overlaid,
    picked_documents,
)
from qrag_integrations.core.snapshot_cache import BuiltFor
from qrag_integrations.core.step import CorpusTexts


class DocumentRotation:
    """The candidates a search scores: a snapshot's rows as they are, or in document position
    mode with their fixed positions: as stored with runs of equal positions (few long runs), else
    rotated (then the search proper runs as in mode none); a whole snapshot's layout (and rotated
    copy) is kept until its embeddings change (thread-safe)."""

    def __init__(self, config: QRAGConfig) -> None:
        self.config = config
        self._slot = BuiltFor()

    def candidates(
        self, snap: Snapshot, filter: MetadataFilter | None, keep: bool = True
    ) -> IndexCandidates:
        """The candidates of ``snap`` under ``filter``; ``keep=False``: a rotated copy is not kept
        (one of many indexes searched once)."""
        plain = IndexCandidates.of(snap, filter)
        if not self.config.position_mode.in_documents:
            return plain
        if plain.rows is not None:
            doc_ids = [snap.chunks[int(r)].doc_id for r in plain.rows]
            where, runs, rotated = fixed_layout(doc_ids, plain.emb, self.config)
            emb = plain.emb if rotated is None else rotated
            return IndexCandidates(snap, plain.rows, emb, runs, plain.emb, where)

        def build() -> tuple[DocumentLayout, Runs | None, torch.Tensor | None]:
            return fixed_layout([c.doc_id for c in snap.chunks], snap.embeddings, self.config)

        where, runs, rotated = self._slot.get(snap.embeddings, build) if keep else build()
        if rotated is None:
            return IndexCandidates(snap, None, snap.embeddings, runs, layout=where)
        return IndexCandidates(
            Snapshot(snap.chunks, rotated), None, rotated, None, snap.embeddings, where
        )


@dataclass(frozen=True)
class IndexCandidates:
    """The chunks one question searches: a snapshot's rows (all, or those a filter matched)."""

    snap: Snapshot
    rows: np.ndarray | None
    """Snapshot rows of the candidates in document order; ``None`` = every row."""
    emb: torch.Tensor
    """Their embeddings, row ``r`` = candidate rank ``r``."""
    runs: Runs | None = None
    """Document position modes on unrotated ``emb``: the runs ``(start, stop, position)`` of equal
    fixed positions, the layout every step scores (``document_relative`` re-lays out the documents
    holding picks over them; ``None``: the mode's own layout, or a rotated copy)."""
    plain: torch.Tensor | None = None
    """The candidates' stored (unrotated) embeddings where ``emb`` is a rotated copy."""
    layout: DocumentLayout | None = None
    """Document position modes: where each candidate sits in its document."""

    @property
    def fixed(self) -> np.ndarray | None:
        """Document position modes: each candidate's fixed position (a document-mode hit reports
        it); ``emb`` is already rotated by it unless ``runs`` is set."""
        return None if self.layout is None else self.layout.fixed

    @property
    def unrotated(self) -> torch.Tensor:
        """The candidates' embeddings as stored (no document-position rotation)."""
        return self.emb if self.plain is None else self.plain

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

    def vectors(self, ranks: Sequence[int]) -> torch.Tensor:
        # only the rows asked for, never the whole matrix (a copy of every embedding per call)
        return self.unrotated[torch.tensor(list(ranks), device=self.unrotated.device)]

    def corpus(self) -> CorpusTexts:
        """The snapshot's texts, keyed by its stored embeddings (a new snapshot has new ones)."""
        snap = self.snap
        return CorpusTexts(snap.embeddings, lambda: [c.text for c in snap.chunks], self.rows)

    def layout_runs(
        self, config: QRAGConfig, picked: list[int]
    ) -> list[tuple[int, int, int]] | None:
        """The runs ``(start, stop, position)`` of equal positions a step scores ``emb`` at, given
        the ranks ``picked`` (``None``: absolute positions, every chunk its own)."""
        step, span = config.relative_step, config.relative_span
        if self.layout is None:
            return layout_runs(config.position_mode, self.n, picked, step, span)
        base = list(self.runs) if self.runs is not None else [(0, self.n, 0)] if self.n else []
        if config.position_mode is not PositionMode.DOCUMENT_RELATIVE or not picked:
            return base
        return overlaid(base, *self.relaid(config, picked))

    def relaid(
        self, config: QRAGConfig, picked: list[int]
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
        """``document_relative``: the ``(start, stop)`` of each document holding picks, and those
        documents' runs (positions over ``emb``) laid out around them."""
        assert self.layout is not None
        order, length = self.layout.order, self.layout.length
        offset = None if self.runs is not None else self.fixed  # a rotated copy is searched
        runs = document_runs(
            order, length, picked, config.relative_step, config.relative_span, offset
        )
        return picked_documents(order, length, picked), runs

    def fixed_of(self, ranks: np.ndarray) -> np.ndarray | None:
        """The positions to rotate ``emb[ranks]`` by when scoring them one by one (``None``: as
        they are, already rotated or no fixed positions)."""
        return None if self.runs is None or self.fixed is None else self.fixed[ranks]

    def position(self, rank: int, searched: int) -> int:
        """The position a hit on ``rank`` reports, given the one it was scored at: on a rotated
        copy the fixed rotation is added (document mode scores those at 0)."""
        if self.fixed is None or self.runs is not None:
            return searched
        return int(self.fixed[rank]) + searched

    def shares(self, config: QRAGConfig, picked: Sequence[Sequence[int]]) -> bool:
        """Whether a batch with these picks is scanned as one
        (:func:`~qrag_integrations.core.exact_scan.relaid_top_k`): positions
        ``document_relative``, two or more questions, and their relaid documents together no
        bigger than the index (so the per-question scans add at most one pass)."""
        if config.position_mode is not PositionMode.DOCUMENT_RELATIVE:
            return False
        if len(picked) < 2 or self.layout is None or self.rows is not None:
            return False
        order, length = self.layout.order, self.layout.length
        relaid = sum(hi - lo for p in picked for lo, hi in picked_documents(order, length, p))
        return relaid <= self.n
