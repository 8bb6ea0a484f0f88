"""A batch's shared scan under ``document_relative`` positions after the first step.

The questions' layouts differ only inside the documents holding their picks. So one block scan
of the fixed layout serves the whole batch, each question's relaid documents masked out of it,
and each question scans its relaid documents alone at their moved positions; the two best lists
merge. Used where the relaid documents are small against the index (many short documents); one
long document re-laid out for every question is scanned per question, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from qrag_integrations.core.candidates import IndexCandidates
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.positions import picked_documents
from qrag_integrations.core.scan import rotated_states, top_k_shared


def shares(config: QRAGConfig, cands: IndexCandidates, picked: Sequence[Sequence[int]]) -> bool:
    """Whether a batch with these picks is scanned as one (:func:`relaid_top_k`): positions
    ``document_relative``, two or more questions, and their relaid documents together no bigger
    than the index (so the per-question scans add at most one pass)."""
    if config.position_mode is not PositionMode.DOCUMENT_RELATIVE:
        return False
    if len(picked) < 2 or cands.layout is None or cands.rows is not None:
        return False
    order, length = cands.layout.order, cands.layout.length
    relaid = sum(hi - lo for p in picked for lo, hi in picked_documents(order, length, p))
    return relaid <= cands.n


def _merge(
    shared: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    own: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best of two ``(q, rank, position)`` columns: higher Q first, the lower rank
    among equal ones (as every scan of the search breaks ties)."""
    q, rank, pos = (torch.cat([a, b.to(a.device)]) for a, b in zip(shared, own))
    by_rank = rank.argsort(stable=True)
    order = by_rank[q[by_rank].argsort(descending=True, stable=True)][:k]
    return q[order], rank[order], pos[order]


def relaid_top_k(
    config: QRAGConfig,
    cands: IndexCandidates,
    states: torch.Tensor,
    picked: Sequence[Sequence[int]],
    k: int,
    block: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best ``(Q, rank, position)`` of each state, each ``(min(k, n), B)``, as
    :func:`~qrag_integrations.core.scan.top_k_shared` gives them over one layout (``block``: rows
    scored at a time)."""
    runs = cands.layout_runs(config, [])
    assert runs is not None
    rotated = rotated_states(config, states, [p for _, _, p in runs])
    relaid = [cands.relaid(config, list(p)) for p in picked]
    q, rank, pos = top_k_shared(
        cands.emb, runs, rotated, picked, k, block, skip=[spans for spans, _ in relaid]
    )
    columns = []
    for i, (_, own) in enumerate(relaid):
        column = (q[:, i], rank[:, i], pos[:, i])
        if own:
            turned = rotated_states(config, states[i : i + 1], [p for _, _, p in own])
            mine = top_k_shared(cands.emb, own, turned, [picked[i]], k, block)
            column = _merge(column, tuple(t[:, 0] for t in mine), q.shape[0])  # type: ignore[arg-type]
        columns.append(column)
    return tuple(torch.stack([c[j] for c in columns], dim=1) for j in range(3))  # type: ignore[return-value]
