"""An episode's documents and chunk positions, for every position mode.

Position mode ``document`` gives each chunk a fixed position inside its document
(:func:`~qrag_integrations.core.positions.layout_positions`). An episode's documents are the runs
of equal consecutive titles (a HotpotQA paragraph, a SQuAD article), or the whole episode when it
has no titles (a BabiLong or RULER haystack) or a mixture part made it one document
(``one_document: true``). The retriever gets the same documents
(:func:`episode_doc_ids` as ``doc_ids``), so training and search lay positions out alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.positions import (
    document_layout,
    document_relative_positions_at,
    layout,
    layout_positions,
)
from qrag_training.data.episode import Episode
from qrag_training.data.mixture import ONE_DOCUMENT_KEY

#: ``Episode.meta`` key of ``[[order, length, rank], ...]`` per chunk: the documents an episode's
#: chunks came from when some chunks were dropped (sampled negatives), and each chunk's rank in the
#: full episode, so positions (fixed or laid out around picks) stay theirs.
LAYOUT_KEY = "document_layout"


class PositionSettings(Protocol):
    """The position fields shared by ``QRAGConfig`` and ``EnvSettings``."""

    position_mode: PositionMode
    relative_step: int
    relative_span: float


def episode_doc_ids(episode: Episode) -> list[str]:
    """One id per chunk: the index of its run of equal consecutive titles (all ``"0"`` without
    titles or with ``meta["one_document"]``)."""
    if episode.titles is None or episode.meta.get(ONE_DOCUMENT_KEY):
        return ["0"] * len(episode.chunks)
    ids, run = [], 0
    for i, title in enumerate(episode.titles):
        run += int(i > 0 and title != episode.titles[i - 1])
        ids.append(str(run))
    return ids


def episode_layout(episode: Episode) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk's order inside its document and that document's chunk count."""
    order, length, _ = _layout_and_ranks(episode)
    return order, length


def _layout_and_ranks(episode: Episode) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`episode_layout` and each chunk's rank in the full episode (its row when no chunk
    was dropped)."""
    kept = episode.meta.get(LAYOUT_KEY)
    if kept is not None:
        arr = np.asarray(kept, dtype=np.int64).reshape(len(episode.chunks), 3)
        return arr[:, 0], arr[:, 1], arr[:, 2]
    order, length = document_layout(episode_doc_ids(episode))
    return order, length, np.arange(len(order), dtype=np.int64)


def kept_layout_meta(episode: Episode, rows: Sequence[int]) -> dict:
    """``episode.meta`` for an episode reduced to the chunks at ``rows``, with their layout."""
    order, length, ranks = _layout_and_ranks(episode)
    kept = [[int(order[r]), int(length[r]), int(ranks[r])] for r in rows]
    return {**episode.meta, LAYOUT_KEY: kept}


def positions_for(
    episode: Episode, settings: PositionSettings, picked: Sequence[int]
) -> np.ndarray:
    """Positions of all of ``episode``'s chunks given the ranks ``picked``, in any mode."""
    s = settings
    if s.position_mode is PositionMode.DOCUMENT:
        return layout_positions(*episode_layout(episode), s.relative_step, s.relative_span)
    if s.position_mode is PositionMode.DOCUMENT_RELATIVE:
        # ranks in the full episode tell the documents apart when sampled negatives dropped chunks
        order, length, ranks = _layout_and_ranks(episode)
        taken = list(picked)
        return document_relative_positions_at(
            ranks,
            order,
            length,
            ranks[taken],
            order[taken],
            s.relative_step,
            s.relative_span,
        )
    return layout(s.position_mode, len(episode.chunks), picked, s.relative_step, s.relative_span)
