"""How a search step picks where no rule reads Q's pool: the scorer a search chooses once.

Every scorer gives each question of a :class:`~qrag_integrations.core.step.Step` its pick
``(rank, Q, position)`` (``None``: nothing left that the question may get):

- :class:`ExactScorer`: the exact arg-max (:class:`~qrag_integrations.core.exact_scan.ExactScan`),
  one pass for a batch that shares one layout;
- :class:`CompactScorer`: a compact int8 / binary / bf16 copy scans every run of equal positions
  and its best candidates over all runs are re-scored exactly
  (:mod:`~qrag_integrations.core.compact_scan`);
- :class:`FaissScorer`: FAISS pre-selects by unrotated inner product, re-scored exactly at the
  candidates' positions (:mod:`~qrag_integrations.core.faiss_preselect`);
- :class:`SetScorer`: each question's own candidate set picks (store-backed search,
  :mod:`qrag_integrations.stores.search`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from qrag_integrations.core.candidates import IndexCandidates
from qrag_integrations.core.compact_scan import CompactScanner, top_compact
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.exact_scan import ExactScan
from qrag_integrations.core.faiss_preselect import FaissPreselector
from qrag_integrations.core.positions import positions_in_runs
from qrag_integrations.core.scan import Scored, best_first, score_at_positions
from qrag_integrations.core.step import Step


class Scorer(Protocol):
    """Picks each question's chunk at one step."""

    def picks(self, step: Step) -> list[Scored | None]:
        """``(rank, Q, position)`` of each question's pick (``None``: nothing left)."""

    def pools(self, step: Step, depth: int) -> list[list[Scored]]:
        """Each question's ``depth`` best untaken ``(rank, Q, position)``, best first: the pool
        the search's rules read (exact Q-values; from this scorer's candidates)."""


class ExactScorer:
    """The exact arg-max over every untaken candidate of in-memory candidates."""

    def __init__(self, exact: ExactScan) -> None:
        self.exact = exact

    def picks(self, step: Step) -> list[Scored | None]:
        if step.one_layout:  # no picks yet, or picks move no position: one pass for the batch
            cands: IndexCandidates = step.candidates[0]  # type: ignore[assignment]
            return self.exact.best_shared(cands, step.states, step.picked)  # type: ignore[return-value]
        return [
            self.exact.best_one(cands, state, picked)  # type: ignore[arg-type]
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    def pools(self, step: Step, depth: int) -> list[list[Scored]]:
        return self.exact.pools(step, depth)


class CompactScorer:
    """A compact copy's ``rescore`` best rows over every run of equal positions, re-scored
    exactly, for a batch sharing one unfiltered in-memory index; the exact scan where the copy
    does not serve (a lone question on a bf16 copy, a bf16 batch with different layouts)."""

    def __init__(self, exact: ExactScan, scanner: CompactScanner, rescore: int) -> None:
        self.exact, self.scanner, self.rescore = exact, scanner, rescore
        self._exactly = ExactScorer(exact)

    def picks(self, step: Step) -> list[Scored | None]:
        if not self._serves(step):
            return self._exactly.picks(step)
        return [top[0] if top else None for top in self._top(step, 1)]

    def pools(self, step: Step, depth: int) -> list[list[Scored]]:
        """The best of the copy's candidates re-scored exactly (exact where the copy does not
        serve), so the rules cost no exact scan."""
        return self._top(step, depth) if self._serves(step) else self._exactly.pools(step, depth)

    def _serves(self, step: Step) -> bool:
        fresh = step.number == 1 or not self.exact.config.position_mode.moves
        return self.scanner.serves(len(step.active), fresh)

    def _top(self, step: Step, depth: int) -> list[list[Scored]]:
        cands: IndexCandidates = step.candidates[0]  # type: ignore[assignment]
        return top_compact(
            self.scanner,
            cands.emb,
            step.states,
            step.picked,
            lambda taken: self.exact.runs(cands, taken),  # type: ignore[arg-type,return-value]
            self.exact.rotated,
            self.rescore,
            depth,
        )


class FaissScorer:
    """Per question: the ``want`` rows FAISS ranks nearest the state by unrotated inner product
    (besides its picks), re-scored exactly at their positions."""

    def __init__(self, exact: ExactScan, want: int, factory: str) -> None:
        self.exact, self.want, self.factory = exact, want, factory
        self.preselector = FaissPreselector()

    def picks(self, step: Step) -> list[Scored | None]:
        return [
            self.best(cands, state, picked)  # type: ignore[arg-type]
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    def pools(self, step: Step, depth: int) -> list[list[Scored]]:
        return [
            self.top(cands, state, picked, depth)  # type: ignore[arg-type]
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

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
        found = self.preselector.candidates(cands.snap, state, want, self.factory)
        cand = np.array(sorted({c for c in found if c >= 0 and c not in taken}), dtype=np.int64)
        if cand.size == 0:
            return self.exact.top(cands, state, picked, depth)
        sub = cands.emb[torch.from_numpy(cand).to(cands.emb.device)]
        if self.exact.config.position_mode is PositionMode.DOCUMENT_RELATIVE:
            at = positions_in_runs(self.exact.runs(cands, picked), cand)  # type: ignore[arg-type]
        else:
            at = cands.fixed_of(cand)
        model = self.exact.model
        scores, positions = score_at_positions(model, state, sub, cand, cands.n, picked, at)
        return best_first(zip(cand.tolist(), scores.tolist(), positions.tolist()), depth)


class SetScorer:
    """Each question's :class:`~qrag_integrations.core.candidates.CandidateSet` picks and gives its
    pool (a vector store's candidates re-scored exactly); ``searcher`` is passed to the sets."""

    def __init__(self, searcher: Any) -> None:
        self.searcher = searcher

    def picks(self, step: Step) -> list[Scored | None]:
        return [
            cands.best(self.searcher, state, picked)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    def pools(self, step: Step, depth: int) -> list[list[Scored]]:
        return [
            cands.top(self.searcher, state, picked, depth)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]
