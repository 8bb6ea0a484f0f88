"""The chunks one question searches, as the search loop sees them (:class:`CandidateSet`), and
the in-memory index's kind (:class:`IndexCandidates`: a snapshot's rows, all or those a filter
matched)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from qrag_integrations.core.chunks import Chunk, MetadataFilter, Snapshot
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.positions import (
    document_layout,
    document_runs,
    fixed_runs,
    layout_positions,
    layout_runs,
    overlaid,
    picked_documents,
    rotate_as,
)
from qrag_integrations.core.scan import Scored
from qrag_integrations.core.snapshot_cache import BuiltFor

#: Rows rotated at a time when a snapshot is rotated for document positions.
ROTATION_BLOCK = 16384

#: Runs ``(start, stop, position)`` of consecutive chunks sharing one fixed position.
Runs = tuple[tuple[int, int, int], ...]

#: Document mode searches stored, unrotated embeddings run by run of equal fixed positions (the
#: state rotated once per run, as in relative mode) when the runs average at least this many
#: chunks, e.g. one long document (at most ``int(relative_span * relative_step) + 1`` runs);
#: shorter runs (many short documents) would cost a rotation and a small scan each per step, so
#: those are searched on a rotated copy of the embeddings (one more float32 copy).
MIN_MEAN_RUN = 1024


def _rotated(emb: torch.Tensor, positions: np.ndarray, config: QRAGConfig) -> torch.Tensor:
    # in blocks into one new tensor: the rotation's float32 temporaries stay a block's size
    # (whole, they were ~7 times the embeddings at 400K chunks)
    out, at = torch.empty_like(emb), torch.from_numpy(positions).to(emb.device)
    for i in range(0, emb.shape[0], ROTATION_BLOCK):
        j = i + ROTATION_BLOCK
        out[i:j] = rotate_as(config, emb[i:j], at[i:j])
    return out


@dataclass(frozen=True)
class DocumentLayout:
    """Where the searched chunks sit in their documents, and the fixed positions that gives."""

    order: np.ndarray
    """Each chunk's order inside its document (a run of equal consecutive doc ids)."""
    length: np.ndarray
    """Each chunk's document's chunk count."""
    fixed: np.ndarray
    """Each chunk's fixed position (:func:`~qrag_integrations.core.positions.layout_positions`)."""


def _document_layout(
    chunks: Sequence[Chunk], emb: torch.Tensor, config: QRAGConfig
) -> tuple[DocumentLayout, Runs | None, torch.Tensor | None]:
    """The fixed layout of searched ``chunks`` (document modes), its runs and rotated embeddings:
    runs (``emb`` searched as stored) where they are long, else a rotated copy."""
    order, length = document_layout([c.doc_id for c in chunks])
    fixed = layout_positions(order, length, config.relative_step, config.relative_span)
    runs = fixed_runs(fixed)
    where = DocumentLayout(order, length, fixed)
    if not fixed.any() or len(runs) * MIN_MEAN_RUN <= fixed.size:
        return where, runs, None
    return where, None, _rotated(emb, fixed, config)


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
            chunks = [snap.chunks[int(r)] for r in plain.rows]
            where, runs, rotated = _document_layout(chunks, plain.emb, self.config)
            emb = plain.emb if rotated is None else rotated
            return IndexCandidates(snap, plain.rows, emb, runs, plain.emb, where)

        def build() -> tuple[DocumentLayout, Runs | None, torch.Tensor | None]:
            return _document_layout(snap.chunks, snap.embeddings, self.config)

        where, runs, rotated = self._slot.get(snap.embeddings, build) if keep else build()
        if rotated is None:
            return IndexCandidates(snap, None, snap.embeddings, runs, layout=where)
        return IndexCandidates(
            Snapshot(snap.chunks, rotated), None, rotated, None, snap.embeddings, where
        )


@dataclass(frozen=True)
class CorpusTexts:
    """The texts BM25 ranks a candidate set's chunks over: every chunk of the corpus the set was
    drawn from (a filter does not change the terms' statistics), and where the set's ranks lie."""

    key: torch.Tensor | Hashable
    """Names the corpus: its BM25 index is rebuilt when the key changes (a tensor: by identity)."""
    texts: Callable[[], Sequence[str]]
    """Every corpus text, corpus row ``i`` = ``texts()[i]`` (read when an index is built)."""
    rows: np.ndarray | None
    """The corpus row of each candidate rank; ``None``: rank = row."""


class CandidateSet(Protocol):
    """The chunks one question searches, as the search loop and its rules see them: how many there
    are, the chunk and stored embedding at a document-order rank, the corpus texts BM25 reads, and
    the best unpicked ones for a state."""

    @property
    def n(self) -> int:
        """Number of chunks searched (positions are laid out over them)."""

    def chunk(self, rank: int) -> Chunk:
        """The chunk at this document-order rank (at least every picked or pooled one)."""

    def vectors(self, ranks: Sequence[int]) -> torch.Tensor:
        """The stored (unrotated) embeddings at ``ranks`` (at least picked or pooled ones)."""

    def corpus(self) -> CorpusTexts:
        """The texts BM25 ranks these chunks over."""

    def best(self, searcher: Any, state: torch.Tensor, picked: list[int]) -> Scored | None:
        """``(rank, Q-value, position)`` of the pick for ``state`` given the ranks ``picked``;
        ``None`` when no chunk the question may get is left (its search ends). ``searcher`` is
        the :class:`~qrag_integrations.core.search.MultiStepSearcher` asking (a set that scores
        its own chunks needs nothing of it)."""

    def top(
        self, searcher: Any, state: torch.Tensor, picked: list[int], depth: int
    ) -> list[Scored]:
        """The ``depth`` best unpicked ``(rank, Q-value, position)`` for ``state``, best first:
        the pool the search's rules read."""


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

    def best(self, searcher: Any, state: torch.Tensor, picked: list[int]) -> Scored:
        """The exact arg-max ``(rank, Q, position)`` over every unpicked candidate (the
        searcher's :attr:`~qrag_integrations.core.search.MultiStepSearcher.exact` scan)."""
        return searcher.exact.best_one(self, state, picked)

    def top(
        self, searcher: Any, state: torch.Tensor, picked: list[int], depth: int
    ) -> list[Scored]:
        """The exact ``depth`` best unpicked candidates (the searcher's exact scan)."""
        return searcher.exact.top(self, state, picked, depth)
