"""What the search loop, its scorer and its rules share at one step: a question's candidates
(:class:`CandidateSet`), the step (:class:`Step`), the scorer's interface (:class:`Scorer`) and a
scored chunk (:data:`Scored`). Each scorer is typed with the candidates it scores, so the loop
hands it exactly those (in memory :class:`~qrag_integrations.core.index.IndexCandidates`, a
store's own set in :mod:`qrag_integrations.stores.search`)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import torch

from qrag_integrations.core.chunks import Chunk

#: A scored chunk of a step: ``(rank, Q, position)``.
Scored = tuple[int, float, int]


def best_first(hits: Iterable[Scored], depth: int) -> list[Scored]:
    """The ``depth`` best ``(rank, Q, position)`` of ``hits``, higher Q first and the lower rank
    first among equal ones (the exact scan's tie rule)."""
    return heapq.nsmallest(depth, hits, key=lambda hit: (-hit[1], hit[0]))


def pool_best(pool: list[Scored]) -> Scored | None:
    """The step's pick from its pool: the best Q, the lowest rank among equal ones (as every scan
    of the search breaks ties); ``None`` when nothing is left."""
    if not pool:
        return None
    return min((hit for hit in pool if hit[1] == pool[0][1]), key=lambda hit: hit[0])


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
    """The chunks one question searches, as the loop and its rules read them (data only: the
    search's :class:`Scorer` scores them): how many there are, the chunk and stored embedding at a
    document-order rank, the corpus texts BM25 reads, and the position a pick reports."""

    @property
    def n(self) -> int:
        """Number of chunks searched (positions are laid out over them)."""

    def chunk(self, rank: int) -> Chunk:
        """The chunk at this document-order rank (at least every picked or pooled one)."""

    def vectors(self, ranks: Sequence[int]) -> torch.Tensor:
        """The stored (unrotated) embeddings at ``ranks`` (at least picked or pooled ones)."""

    def corpus(self) -> CorpusTexts:
        """The texts BM25 ranks these chunks over."""

    def position(self, rank: int, searched: int) -> int:
        """The position a pick of ``rank`` reports, given the one it was scored at."""


C = TypeVar("C", bound=CandidateSet)


@dataclass(frozen=True)
class Step(Generic[C]):
    """Step ``number`` of the questions still searching; entry ``i`` of every field is the
    ``i``-th of them (question number ``active[i]`` of the batch)."""

    number: int
    """The step, from 1."""
    active: list[int]
    """The questions' numbers in the batch."""
    candidates: Sequence[C]
    """Each question's candidates (the same set for all in a shared search)."""
    states: torch.Tensor
    """``(B, D)``: their (anchored, placed) state embeddings."""
    picked: list[list[int]]
    """Each question's picked ranks, in pick order."""
    shared: bool
    """Every question searches ``candidates[0]`` (one index for the batch)."""


class Scorer(Protocol[C]):
    """Scores one step over candidates of type ``C``: each question's pick, or its pool."""

    def picks(self, step: Step[C]) -> list[Scored | None]:
        """``(rank, Q, position)`` of each question's pick (``None``: nothing left)."""

    def pools(self, step: Step[C], depth: int) -> list[list[Scored]]:
        """Each question's ``depth`` best untaken ``(rank, Q, position)``, best first: the pool
        the search's rules read (exact Q-values; from this scorer's candidates)."""
