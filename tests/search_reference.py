"""The brute-force reference of the multi-step search (the package's
:mod:`~qrag_integrations.core.reference_search`, over an index) with the per-step Q-values the
rules' references build on, and the test settings, shared by the tests of the in-memory search
(tests/core) and the store-backed search (tests/stores)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.positions import (
    document_positions,
    layout,
    layout_positions,
    relative_layout,
    rotate,
    rotate_as,
)
from qrag_integrations.core.reference_search import reference_search
from qrag_integrations.stores.rows import SortedKeys
from qrag_integrations.stores.search import StoreCandidates

N = 13


QUERIES = ["where is mary", "what did john give to sandra before he went to the garden", "who"]


MODES = {
    "relative": {"position_mode": PositionMode.RELATIVE, "relative_step": 20},
    "relative-step4": {"position_mode": PositionMode.RELATIVE, "relative_step": 4},
    "relative-step1": {"position_mode": PositionMode.RELATIVE, "relative_step": 1},
    "absolute": {"position_mode": PositionMode.ABSOLUTE},
    "none": {"position_mode": PositionMode.NONE},
    "none-anchored": {"position_mode": PositionMode.NONE, "question_weight": 0.7},
    "relative-anchored": {
        "position_mode": PositionMode.RELATIVE,
        "relative_step": 4,
        "question_weight": 0.7,
    },
    "document": {"position_mode": PositionMode.DOCUMENT},
    "document-anchored": {"position_mode": PositionMode.DOCUMENT, "question_weight": 0.7},
    # only slow feature pairs turn (the two fastest of the tiny model's 8 per half stay put)
    "document-slow": {"position_mode": PositionMode.DOCUMENT, "rope_max_frequency": 0.2},
    # the state rotated by the latest pick's fixed position
    "document-last-pick": {
        "position_mode": PositionMode.DOCUMENT,
        "question_weight": 0.7,
        "state_at_last_pick": True,
    },
    "relative-slow": {"position_mode": PositionMode.RELATIVE, "rope_max_frequency": 0.2},
    "document-relative": {"position_mode": PositionMode.DOCUMENT_RELATIVE},
    "document-relative-anchored": {
        "position_mode": PositionMode.DOCUMENT_RELATIVE,
        "relative_step": 4,
        "question_weight": 0.7,
    },
}


def random_index(n: int = N, seed: int = 0, dtype: torch.dtype = torch.float32) -> ChunkIndex:
    index = ChunkIndex(32, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(n, 32, generator=g)
    metas = [{"doc": "A" if i % 3 else "B", "i": i} for i in range(n)]
    docs = ["d1" if i < n // 2 else "d2" for i in range(n)]  # two documents, in order
    index.add(TEXTS[:n], e, metadatas=metas, ids=[f"c{i}" for i in range(n)], doc_ids=docs)
    return index


def with_config(model: QRAGModel, **changes: object) -> QRAGModel:
    """The same weights (shared, not copied) under a config with ``changes``: the search reads
    its settings from ``model.config``."""
    clone = QRAGModel.__new__(QRAGModel)
    clone.__dict__ = dict(model.__dict__)
    clone.config = dataclasses.replace(model.config, **changes)
    return clone


def rules(model: QRAGModel, **changes: object) -> SearchPolicy:
    """The policy ``model``'s checkpoint recommends with ``changes`` (``SearchPolicy.of``)."""
    return SearchPolicy.of(model.config, **changes)  # type: ignore[arg-type]


def searched_chunks(model: QRAGModel, index: ChunkIndex, rows: list[int] | None = None):
    """``(chunks, embeddings as scored, fixed positions)`` of the searched rows (all by default):
    in document mode the embeddings are rotated by each chunk's fixed position (a hit reports it),
    else as stored and ``fixed`` is ``None``."""
    snap = index.snapshot()
    rows = list(range(len(snap))) if rows is None else rows
    chunks = [snap.chunks[r] for r in rows]
    emb = snap.embeddings[rows].float()
    cfg = model.config
    fixed = None
    if cfg.position_mode is PositionMode.DOCUMENT:  # fixed positions among the searched chunks
        ids = [c.doc_id for c in chunks]
        fixed = document_positions(ids, cfg.relative_step, cfg.relative_span)
        emb = rotate(
            emb, torch.from_numpy(fixed), cfg.rope_theta, max_frequency=cfg.rope_max_frequency
        )
    return chunks, emb, fixed


def brute_force(
    model: QRAGModel,
    index: ChunkIndex,
    query: str,
    k: int,
    rows: list[int] | None = None,
    threshold: float | None = None,
) -> list[tuple[str, int, float, int]]:
    """The package's executable specification of the search
    (:func:`~qrag_integrations.core.reference_search.reference_search`) over the searched rows
    (all by default): ``(chunk id, step, Q, position)`` per pick."""
    snap = index.snapshot()
    rows = list(range(len(snap))) if rows is None else rows
    chunks = [snap.chunks[r] for r in rows]
    return as_tuples(reference_search(model, chunks, snap.embeddings[rows], query, k, threshold))


def step_q_values(
    model: QRAGModel,
    query: str,
    texts: list[str],
    emb: torch.Tensor,
    picked: list[int],
    last_position: int | None = None,
    doc_ids: list[str | None] | None = None,
):
    """One step of the paper's inference: the (anchored) state of ``query`` and the picks, and the
    exact Q of every chunk at its layout position (picked ones ``-inf``), with the positions;
    ``last_position``: the latest pick's fixed position (``state_at_last_pick``); ``doc_ids``:
    each chunk's document (``document_relative``)."""
    cfg = model.config
    text = model.state_text(query, [texts[r] for r in picked], picked_order=picked)
    state = embed_state(model, text)
    if picked:
        state = (state + cfg.question_weight * embed_state(model, query)) / (
            1 + cfg.question_weight
        )
        if cfg.state_at_last_pick:  # <R(p) s, R(c) a> = <s, R(c - p) a>
            state = rotate_as(cfg, state, torch.tensor([last_position]))
    if cfg.position_mode is PositionMode.DOCUMENT_RELATIVE:
        assert doc_ids is not None
        pos = document_relative_reference(doc_ids, picked, cfg.relative_step, cfg.relative_span)
    else:
        pos = layout(cfg.position_mode, len(texts), picked, cfg.relative_step, cfg.relative_span)
    with torch.no_grad():
        q = model.q_values(state, emb, torch.from_numpy(pos))[0].clone()
    q[picked] = -torch.inf
    return q, pos


def document_relative_reference(
    doc_ids: list[str | None], picked: list[int], step: int, span: float
) -> np.ndarray:
    """``document_relative`` positions, document by document (runs of equal consecutive ids):
    the relative layout of the document's picks where it holds any, else the fixed one."""
    out: list[int] = []
    i = 0
    while i < len(doc_ids):
        j = i
        while j < len(doc_ids) and doc_ids[j] == doc_ids[i]:
            j += 1
        local = [p - i for p in picked if i <= p < j]
        if local:
            out += relative_layout(j - i, local, step, span).tolist()
        else:
            out += layout_positions(np.arange(j - i), np.full(j - i, j - i), step, span).tolist()
        i = j
    return np.array(out, dtype=np.int64)


def as_tuples(hits) -> list[tuple[str, int, float, int]]:
    return [(h.chunk.id, h.step, h.q_value, h.position) for h in hits]


def assert_same(got, expected) -> None:
    assert [(i, s, p) for i, s, _, p in got] == [(i, s, p) for i, s, _, p in expected]
    for (_, _, q1, _), (_, _, q2, _) in zip(got, expected):
        assert q1 == pytest.approx(q2, abs=1e-5)


# distinct token lengths, so texts differ to the model whatever its vocabulary
TEXTS = [f"fact {i} " + "the " * i for i in range(N)]


_STATE_CACHE: dict[tuple[QRAGModel, str], torch.Tensor] = {}


def embed_state(model: QRAGModel, text: str) -> torch.Tensor:
    """One unbatched state pass (cached: the models here are deterministic and never change)."""
    key = (model, text)
    if key not in _STATE_CACHE:
        with torch.no_grad():
            _STATE_CACHE[key] = model.embed_states([text])
    return _STATE_CACHE[key]


class IndexSource:
    """A :class:`CandidateSource` over a ChunkIndex: candidates by unrotated inner product, key =
    (document's rank, row in document order); counts every call."""

    def __init__(self, index: ChunkIndex) -> None:
        self.snap = index.snapshot()
        ranks = {d: r for r, d in enumerate(dict.fromkeys(c.doc_id for c in self.snap.chunks))}
        self.doc_rank = np.array([ranks[c.doc_id] for c in self.snap.chunks], dtype=np.int64)
        self.embedding_dim = index.embedding_dim
        self.asked: list[int] = []

    def _rows(self, filter) -> np.ndarray:
        rows = self.snap.rows_matching(filter)
        return np.arange(len(self.snap)) if rows is None else rows

    def layout(self, filter) -> SortedKeys:
        rows = self._rows(filter)
        chunks = [self.snap.chunks[r] for r in rows]
        return SortedKeys(
            np.stack([self.doc_rank[rows], rows], axis=1),
            ids=[c.id for c in chunks],
            texts=[c.text for c in chunks],
        )

    def candidates(self, vector: np.ndarray, k: int, filter) -> StoreCandidates:
        self.asked.append(k)
        rows = self._rows(filter)
        emb = self.snap.embeddings[torch.from_numpy(rows)].float().numpy()
        top = rows[np.argsort(-(emb @ vector), kind="stable")[:k]]
        keys = np.stack([self.doc_rank[top], top], axis=1)
        return StoreCandidates(
            [self.snap.chunks[r] for r in top], self.snap.embeddings[top].float().numpy(), keys
        )
