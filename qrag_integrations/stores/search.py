"""Q-RAG multi-step search over candidates a vector store returns (no framework code).

Each step asks a :class:`CandidateSource` for the ``candidates_per_step`` chunks nearest the
step's state embedding (plain inner product or the store's own metric, metadata filter passed
through), reads their vectors and document-order keys, and re-scores them exactly with the
Q-function at the positions the in-memory :class:`~qrag_integrations.core.index.ChunkIndex` would give
them (:func:`~qrag_integrations.core.exact_scan.score_at_positions`, the one scoring code): that
is :class:`StoreScorer`, the store's strategy. The loop, state texts, anchoring, stop rule and
search rules are the in-memory search's (:func:`~qrag_integrations.core.search.run_search`):
BM25 fusion ranks the store's texts (all of them, read once per search and indexed while the store
is unchanged) and the rules read their pool from the candidates. Whenever the candidates hold the
exact arg-max (and a rule's pool), picks, Q-values and positions are the in-memory search's;
:class:`StoreStats` counts how often they held the arg-max (``check_exact=True``).

A filter mapping (:mod:`~qrag_integrations.core.filters`) is pushed down to the store as far as
the store can say it *and* every candidate the store returns is checked against it here
(:func:`admits`, the in-memory index's test), so a store whose filter matches more (Qdrant matches
a list that holds the value, or a nested field by a dotted key; a part it cannot say is left out)
never makes a chunk outside the filter a pick.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from qrag_integrations.core.chunks import Chunk, mapping_filter
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.exact_scan import score_at_positions
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.positions import document_relative_positions_at
from qrag_integrations.core.rules import LexicalRanker
from qrag_integrations.core.search import Hit, run_search
from qrag_integrations.core.step import CorpusTexts, Scored, Step, best_first
from qrag_integrations.core.threads import check_threads, search_threads


@dataclass(frozen=True)
class StoreCandidates:
    """Chunks a store returned for one query vector."""

    chunks: list[Chunk]
    """The chunks (id, text, user metadata, document id, order)."""
    vectors: np.ndarray
    """``(K, D)`` float32 unrotated chunk embeddings as stored."""
    keys: np.ndarray
    """``(K, 2)`` int64 document-order keys ``(doc_rank, order)``."""


class StoreLayout(Protocol):
    """Document order of the chunks one search covers (those a filter matched)."""

    @property
    def n(self) -> int:
        """Number of chunks (positions are laid out over them)."""

    def ranks(self, keys: np.ndarray) -> np.ndarray:
        """Document-order ranks of ``keys`` ``(K, 2)``: how many of the chunks sort before each."""

    def document_positions(self, ranks: np.ndarray, step: int, span: float) -> np.ndarray:
        """Fixed positions (document position mode) of the chunks at ``ranks``."""

    def document_spans(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(first rank, chunk count)`` of the document of each chunk at ``ranks``."""

    def ids(self) -> Sequence[str]:
        """Chunk ids of the chunks in rank order (rank ``i`` is ``ids()[i]``)."""

    def texts(self) -> Sequence[str]:
        """Texts of the chunks in rank order."""


class CandidateSource(Protocol):
    """A store of chunk vectors the store-backed search reads (Qdrant, LangChain and LlamaIndex
    stores: :mod:`qrag_integrations.stores.qdrant`, :mod:`qrag_integrations.stores.framework_stores`)."""

    @property
    def embedding_dim(self) -> int:
        """Size of the stored vectors."""

    def layout(self, filter: Any) -> StoreLayout:
        """The document order of the chunks matching ``filter`` (``None``: all), for one search."""

    def candidates(self, vector: np.ndarray, k: int, filter: Any) -> StoreCandidates:
        """The ``k`` matching chunks the store ranks nearest ``vector`` (fewer if fewer match)."""


@dataclass
class StoreStats:
    """Counters of a :class:`StoreSearcher` (summed over its searches)."""

    steps: int = 0
    """Picks made."""
    candidates: int = 0
    """Candidates re-scored, over all steps."""
    exact_checked: int = 0
    """Steps whose exact arg-max was computed (``check_exact=True``)."""
    exact_in_candidates: int = 0
    """Of those, steps whose exact arg-max was among the store's candidates (then the pick is it)."""

    @property
    def exact_rate(self) -> float | None:
        """Share of checked steps whose candidates held the exact arg-max (``None``: none checked)."""
        return self.exact_in_candidates / self.exact_checked if self.exact_checked else None


def admits(filter: Any) -> Callable[[Chunk], bool]:
    """Our own test of a candidate against ``filter``: a filter mapping (every form of
    :mod:`~qrag_integrations.core.filters`) is checked on the chunk's metadata as the in-memory
    index checks it; a store's own filter object (a Qdrant ``models.Filter``) is the store's to
    apply, and a source re-checks what it can itself (a LangChain callable). LlamaIndex
    ``MetadataFilters`` reach a source as a mapping (the retriever converts them).

    Raises:
        QRAGError: a mapping that is no filter (checked before any search).
    """
    if isinstance(filter, Mapping):
        test = mapping_filter(filter)
        return lambda chunk: test(chunk.metadata)
    return lambda chunk: True


@dataclass(frozen=True)
class _Scored:
    """A step's candidates that are neither picked nor outside the filter, scored."""

    chunks: list[Chunk]
    """The candidates kept."""
    ranks: np.ndarray
    """Their document-order ranks."""
    q: torch.Tensor
    """Their Q-values."""
    positions: np.ndarray
    """Their positions."""
    outside: int
    """Unpicked candidates the store returned that the filter check refused."""
    returned: int
    """Candidates the store returned (fewer than asked: it holds no more)."""


class _StoreSet:
    """One question's view of the store: the :class:`~qrag_integrations.core.step.CandidateSet`
    the search loop and its rules read. It knows the chunks the store returned so far (every pick
    and pool member is one of them)."""

    def __init__(
        self,
        filter: Any,
        layout: StoreLayout,
        corpus: Callable[[], CorpusTexts],
        device: torch.device,
    ) -> None:
        self.filter, self.layout, self.corpus, self.device = filter, layout, corpus, device
        self.n = layout.n
        self.admits = admits(filter)
        """Our own test of a candidate against the filter (:func:`admits`)."""
        self._seen: dict[int, tuple[Chunk, np.ndarray]] = {}  # by rank: chunk, stored vector

    def chunk(self, rank: int) -> Chunk:
        return self._seen[rank][0]

    def vectors(self, ranks: Sequence[int]) -> torch.Tensor:
        rows = np.stack([self._seen[int(r)][1] for r in ranks])
        return torch.from_numpy(rows).to(self.device)

    def position(self, rank: int, searched: int) -> int:
        return searched

    def seen(self, chunks: Sequence[Chunk], ranks: Sequence[int], vectors: np.ndarray) -> None:
        """Keep chunks the store returned, at their ranks, with their stored vectors."""
        for chunk, rank, vector in zip(chunks, ranks, vectors):
            self._seen[rank] = (chunk, vector)


class StoreScorer:
    """The store's strategy: each step asks the store for the ``candidates_per_step`` chunks
    nearest the state and re-scores those the filter check admits exactly at their positions
    (counted in :attr:`stats`, thread-safe)."""

    def __init__(
        self, model: QRAGModel, source: CandidateSource, candidates_per_step: int, check_exact: bool
    ) -> None:
        self.model, self.source = model, source
        self.candidates_per_step, self.check_exact = candidates_per_step, check_exact
        self.stats = StoreStats()
        self._lock = threading.Lock()

    # -- the scorer's interface (:class:`~qrag_integrations.core.step.Scorer`) --------------------
    def picks(self, step: Step[_StoreSet]) -> list[Scored | None]:
        return [
            top[0] if top else None
            for top in (
                self.top(cands, state, picked, 1)
                for cands, state, picked in zip(step.candidates, step.states, step.picked)
            )
        ]

    def pools(self, step: Step[_StoreSet], depth: int) -> list[list[Scored]]:
        return [
            self.top(cands, state, picked, depth)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    # -- one question -------------------------------------------------------------------------
    def top(
        self, cands: _StoreSet, state: torch.Tensor, picked: list[int], depth: int
    ) -> list[Scored]:
        """The ``depth`` best of the store's nearest ``max(candidates_per_step, depth)`` unpicked
        chunks at exact Q, best first (``[]``: nothing inside the filter is left)."""
        want = min(cands.n, max(self.candidates_per_step, depth) + len(picked))
        found = self._scored(cands, state, want, picked)
        if not found.chunks and found.outside:  # all refused: look at every match
            found = self._every(cands, state, max(want, cands.n), picked)
        if not found.chunks:
            if found.outside:
                return []  # the store matches more, but nothing inside the filter is left
            raise QRAGError(
                "the store returned no unpicked candidate (was it changed during the search?)"
            )
        exact_found = None
        if self.check_exact:
            every = self._every(cands, state, cands.n, picked)
            best = every.chunks[_arg_max(every.q, every.ranks)].id
            exact_found = best in {c.id for c in found.chunks}
        self._count(len(found.chunks), exact_found)
        scored = zip(found.ranks.tolist(), found.q.tolist(), found.positions.tolist())
        return best_first(scored, depth)

    def _scored(
        self, cands: _StoreSet, state: torch.Tensor, want: int, picked: list[int]
    ) -> _Scored:
        """Candidates among the store's ``want`` nearest that are unpicked and pass the filter
        check, with ranks, Q-values, positions."""
        model = self.model
        got = self.source.candidates(state.detach().float().cpu().numpy(), want, cands.filter)
        if got.vectors.ndim != 2 or (
            len(got.chunks) and got.vectors.shape[1] != model.embedding_dim
        ):
            raise IndexMismatchError(
                f"the store returned vectors of shape {got.vectors.shape}, the model makes {model.embedding_dim}"
            )
        taken = {cands.chunk(r).id for r in picked}
        unpicked = [i for i, c in enumerate(got.chunks) if c.id not in taken]
        keep = [i for i in unpicked if cands.admits(got.chunks[i])]
        chunks = [got.chunks[i] for i in keep]
        ranks = cands.layout.ranks(got.keys[keep].reshape(-1, 2))
        stored = np.ascontiguousarray(got.vectors[keep], dtype=np.float32)
        cands.seen(chunks, ranks.tolist(), stored)
        vectors = torch.from_numpy(stored).to(model.device)
        cfg = model.config
        fixed = None
        if cfg.position_mode is PositionMode.DOCUMENT:  # stored vectors are unrotated
            fixed = cands.layout.document_positions(ranks, cfg.relative_step, cfg.relative_span)
        elif cfg.position_mode is PositionMode.DOCUMENT_RELATIVE:
            fixed = self._document_relative(cands.layout, ranks, picked)
        q, positions = score_at_positions(model, state, vectors, ranks, cands.n, picked, fixed)
        return _Scored(
            chunks, ranks, q.cpu(), positions, len(unpicked) - len(keep), len(got.chunks)
        )

    def _every(
        self, cands: _StoreSet, state: torch.Tensor, want: int, picked: list[int]
    ) -> _Scored:
        """Candidates from ``want`` on, asking for twice as many while the store returns as many
        as asked and the filter check leaves fewer than the unpicked matching chunks (a store
        that matches more than the filter may rank its extra chunks first)."""
        while True:
            found = self._scored(cands, state, want, picked)
            if len(found.chunks) >= cands.n - len(picked) or found.returned < want:
                return found
            want *= 2

    def _document_relative(
        self, layout: StoreLayout, ranks: np.ndarray, picked: list[int]
    ) -> np.ndarray:
        """Positions of the chunks at ``ranks`` under ``document_relative`` given the picks."""
        cfg = self.model.config
        first, length = layout.document_spans(ranks)
        taken = np.asarray(picked, dtype=np.int64)
        taken_first = layout.document_spans(taken)[0] if len(taken) else taken
        return document_relative_positions_at(
            ranks,
            ranks - first,
            length,
            taken,
            taken - taken_first,
            cfg.relative_step,
            cfg.relative_span,
        )

    def _count(self, candidates: int, exact_found: bool | None) -> None:
        with self._lock:
            self.stats.steps += 1
            self.stats.candidates += candidates
            if exact_found is not None:
                self.stats.exact_checked += 1
                self.stats.exact_in_candidates += int(exact_found)


def _arg_max(q: torch.Tensor, ranks: np.ndarray) -> int:
    """Index of the highest Q-value; among equal ones the lowest rank, as the exact scan picks."""
    top = float(q.max())
    tied = np.flatnonzero(q.numpy() == top)
    return int(tied[np.argmin(ranks[tied])])


class StoreSearcher:
    """Q-RAG's greedy multi-step search over a :class:`CandidateSource`."""

    def __init__(
        self,
        model: QRAGModel,
        source: CandidateSource,
        candidates_per_step: int = 64,
        check_exact: bool = False,
        policy: SearchPolicy | None = None,
        threads: int | None = None,
    ) -> None:
        """Search ``source`` with ``model``.

        Args:
            model: the Q-RAG model whose chunk encoder wrote the store.
            source: the store.
            candidates_per_step: chunks asked from the store per step and re-scored exactly (at
                least as many as a search rule's pool).
            check_exact: also score every matching chunk each step, to count in :attr:`stats`
                how often the exact arg-max was among the candidates (costly: for evaluation).
            policy: the search rules, as in memory (``None``: the model's checkpoint's).
            threads: threads of a search, as in memory (:attr:`SearchSettings.threads
                <qrag_integrations.core.search.SearchSettings.threads>`).
        """
        if candidates_per_step < 1:
            raise QRAGError(f"candidates_per_step must be >= 1, got {candidates_per_step}")
        if source.embedding_dim != model.embedding_dim:
            raise IndexMismatchError(
                f"the store holds {source.embedding_dim}-dimensional vectors, the model makes {model.embedding_dim}"
            )
        check_threads(threads)
        self.model, self.source = model, source
        self.threads = threads
        """Threads of a search (``SearchSettings.threads``)."""
        self.policy = SearchPolicy.of(model.config) if policy is None else policy
        """The search rules in use."""
        self.scorer = StoreScorer(model, source, candidates_per_step, check_exact)
        """The store's strategy, which each step's picks and pools come from."""
        self.stats = self.scorer.stats
        """Counters of the searches (:class:`StoreStats`)."""
        self._lexical = LexicalRanker()

    @property
    def candidates_per_step(self) -> int:
        """Chunks asked from the store per step and re-scored exactly."""
        return self.scorer.candidates_per_step

    @property
    def check_exact(self) -> bool:
        """Whether every step also scores every matching chunk, counted in :attr:`stats`."""
        return self.scorer.check_exact

    def search(
        self,
        queries: Sequence[str],
        k: int,
        stop_threshold: float | None = None,
        filter: Any = None,
    ) -> list[list[Hit]]:
        """Search several questions (same arguments and results as
        :meth:`MultiStepSearcher.search <qrag_integrations.core.search.MultiStepSearcher.search>`).

        ``filter`` is passed to the source: a filter mapping (every candidate is checked
        against it again, see :func:`admits`), or the store's own filter object. The store must
        not change during a search.
        """
        layout = self.source.layout(filter)  # one filter for all questions: one layout
        corpus = functools.cache(lambda: self._corpus(layout, filter))  # read if a rule needs it
        sets = [_StoreSet(filter, layout, corpus, self.model.device) for _ in queries]
        with search_threads(len(queries), self.threads):
            return run_search(
                self.model,
                self.policy,
                self._lexical,
                queries,
                sets,
                k,
                stop_threshold,
                self.scorer,
                shared=False,
            )

    def _corpus(self, layout: StoreLayout, filter: Any) -> CorpusTexts:
        """Every chunk's text in the store (BM25's term statistics, as an in-memory index of the
        same chunks has them whatever the filter), and the corpus row of each of ``layout``'s
        ranks; keyed by the ids and texts, so an unchanged store keeps its BM25 index."""
        whole = layout if filter is None else self.source.layout(None)
        ids, texts = list(whole.ids()), list(whole.texts())
        rows = None
        if whole is not layout:
            row_of = {chunk_id: row for row, chunk_id in enumerate(ids)}
            rows = np.array([row_of[i] for i in layout.ids()], dtype=np.int64)
        return CorpusTexts((len(ids), hash(tuple(ids)), hash(tuple(texts))), lambda: texts, rows)
