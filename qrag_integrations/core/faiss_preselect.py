"""The FAISS pre-selection strategy for very large indexes (:class:`FaissScorer`): the rows with
the largest unrotated inner product with a state, re-scored exactly at their positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from qrag_integrations.core.chunks import BuiltFor, Snapshot
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.exact_scan import ExactScorer, score_at_positions
from qrag_integrations.core.index import IndexCandidates
from qrag_integrations.core.positions import positions_in_runs
from qrag_integrations.core.step import Scored, Step, best_first
from qrag_integrations.core.threads import faiss_threads_for


class FaissScorer:
    """Per question: the ``want`` rows FAISS ranks nearest the state by unrotated inner product
    (besides its picks), re-scored exactly at their positions. The FAISS index over a snapshot's
    unrotated embeddings (made by the ``faiss.index_factory`` string ``factory``) is built on
    first use and rebuilt when the snapshot's embeddings change (thread-safe)."""

    def __init__(self, exact: ExactScorer, want: int, factory: str) -> None:
        self.exact, self.want, self.factory = exact, want, factory
        self._slot = BuiltFor()

    # -- the scorer's interface (:class:`~qrag_integrations.core.step.Scorer`) --------------------
    def picks(self, step: Step[IndexCandidates]) -> list[Scored | None]:
        return [
            self.best(cands, state, picked)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    def pools(self, step: Step[IndexCandidates], depth: int) -> list[list[Scored]]:
        return [
            self.top(cands, state, picked, depth)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    # -- one question -------------------------------------------------------------------------
    def best(self, cands: IndexCandidates, state: torch.Tensor, picked: list[int]) -> Scored:
        """One question's pick over every row of ``cands``: candidates by FAISS inner product
        on the embeddings searched, then exact Q at their positions."""
        top = self.top(cands, state, picked, 1)
        return top[0] if top else self.exact.best_one(cands, state, picked)

    def top(
        self, cands: IndexCandidates, state: torch.Tensor, picked: list[int], depth: int
    ) -> list[Scored]:
        """One question's ``depth`` best of the FAISS candidates at exact Q, best first (the
        exact scan's where FAISS returns no untaken candidate)."""
        want = min(cands.n, max(self.want, depth) + len(picked))
        taken = set(picked)
        found = self.candidates(cands.snap, state, want)
        cand = np.array(sorted({c for c in found if c >= 0 and c not in taken}), dtype=np.int64)
        if cand.size == 0:
            return self.exact.top(cands, state, picked, depth)
        sub = cands.emb[torch.from_numpy(cand).to(cands.emb.device)]
        at: np.ndarray | None
        if self.exact.config.position_mode is PositionMode.DOCUMENT_RELATIVE:
            runs = self.exact.runs(cands, picked)
            assert runs is not None  # document_relative lays its chunks out in runs
            at = positions_in_runs(runs, cand)
        else:
            at = cands.fixed_of(cand)
        model = self.exact.model
        scores, positions = score_at_positions(model, state, sub, cand, cands.n, picked, at)
        return best_first(zip(cand.tolist(), scores.tolist(), positions.tolist()), depth)

    def candidates(self, snap: Snapshot, state: torch.Tensor, want: int) -> np.ndarray:
        """Ranks of the ``want`` rows with the largest unrotated inner product (``-1`` = none)."""
        index = self._slot.get(snap.embeddings, lambda: _faiss_index(snap, self.factory))
        with faiss_threads_for(1):
            _, cand = index.search(state.detach().cpu().numpy()[None].astype(np.float32), want)
        return cand[0]


def _faiss_index(snap: Snapshot, factory: str) -> Any:
    import faiss

    vectors = snap.embeddings.detach().float().cpu().numpy()
    index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        index.train(vectors)
    index.add(vectors)
    return index
