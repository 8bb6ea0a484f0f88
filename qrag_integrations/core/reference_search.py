"""The executable specification of the search: Q-RAG's greedy multi-step search of one question
as plainly as the paper states it, every chunk scored at its position at every step (no runs, no
rotated copies, no pre-selection, no rules: the policy's rules off). Every scorer of
:mod:`~qrag_integrations.core.search` must pick what it picks, with its Q-values and positions
(the property tests, ``tests/core/test_scorers.py``); far too slow for use."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from qrag_integrations.core.chunks import Chunk
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.positions import (
    document_layout,
    document_relative_positions_at,
    layout_positions,
    relative_layout,
)
from qrag_integrations.core.search import Hit


def reference_layout(
    config: QRAGConfig, doc_ids: Sequence[object], picked: list[int]
) -> np.ndarray:
    """The position of every chunk (document order, these ``doc_ids``) at a step with ``picked``."""
    n, mode, step, span = (
        len(doc_ids),
        config.position_mode,
        config.relative_step,
        config.relative_span,
    )
    order, length = document_layout(doc_ids)
    if mode is PositionMode.NONE:
        return np.zeros(n, dtype=np.int64)
    if mode is PositionMode.ABSOLUTE:
        return np.arange(n, dtype=np.int64)
    if mode is PositionMode.RELATIVE:
        return relative_layout(n, picked, step, span)
    if mode is PositionMode.DOCUMENT or not picked:
        return layout_positions(order, length, step, span)
    at = np.asarray(picked, dtype=np.int64)
    return document_relative_positions_at(np.arange(n), order, length, at, order[at], step, span)


def reference_search(
    model: QRAGModel,
    chunks: Sequence[Chunk],
    embeddings: torch.Tensor,
    query: str,
    k: int,
    stop_threshold: float | None = None,
) -> list[Hit]:
    """``query``'s hits over ``chunks`` (document order; ``embeddings``: theirs, as stored). Each
    step: the state of the question and the picks (anchored to the question and placed at the
    latest pick after the first step), every chunk's exact Q at its layout position, and the best
    unpicked one (the lowest rank among equals), unless its Q is below ``stop_threshold``."""
    picked: list[int] = []
    hits: list[Hit] = []
    question = torch.empty(0)
    doc_ids = [c.doc_id for c in chunks]
    for number in range(1, min(k, len(chunks)) + 1):
        text = model.state_text(query, [chunks[r].text for r in picked], picked_order=picked)
        positions = reference_layout(model.config, doc_ids, picked)
        with torch.inference_mode():
            state = model.embed_states([text]).float()
            if number == 1:
                question = state
            else:
                state = model.anchor_states(state, question)
                state = model.place_states(state, torch.tensor([hits[-1].position]))
            q = model.q_values(state, embeddings.float(), torch.from_numpy(positions))[0]
            q[picked] = -torch.inf
        best = int(q.argmax())
        if stop_threshold is not None and float(q[best]) < stop_threshold:
            break
        picked.append(best)
        hits.append(Hit(chunks[best], number, float(q[best]), int(positions[best])))
    return hits
