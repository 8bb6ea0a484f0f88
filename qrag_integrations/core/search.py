"""Q-RAG's greedy multi-step search: the one loop every path runs (:func:`run_search`), and the
in-memory searcher over a :class:`~qrag_integrations.core.index.ChunkIndex` (no framework code).

Glossary:

- **state**: the embedding of the state text (the question, then the question and the picks so
  far), anchored to the question after the first step and placed at the latest pick.
- **pick**: the chunk a step adds, the arg-max of ``Q = <E_s(s), R(p) E_a(a)>`` over the untaken
  candidates, or what a rule makes of the pool; a hit (:class:`Hit`) reports it.
- **pool**: Q's ``depth`` best untaken chunks of a step, best first, which the rules read.
- **layout**: the position ``p`` of every candidate at a step (none, absolute, relative,
  document, document_relative: :mod:`~qrag_integrations.core.positions`); picks move it in the
  relative modes.
- **run**: consecutive chunks sharing one position in a layout: the state is rotated once per run
  and the run scanned as stored.
- **rank**: a candidate's place in document order among the chunks searched.

The search, step by step (:func:`run_search`):

1. state: embed the state texts of the questions still searching
   (:class:`~qrag_integrations.core.step.Step`);
2. pool: where a rule reads it, the scorer's pool (:meth:`~qrag_integrations.core.step.Scorer.pools`);
3. rules (:mod:`~qrag_integrations.core.rules`): BM25 fusion re-orders the pool's head, and a
   later restatement supersedes a pick;
4. pick: otherwise the scorer's arg-max; a question stops before a pick below ``stop_threshold``.

The scorer is the strategy, chosen once per search, each one class in one module: exact
(:mod:`~qrag_integrations.core.exact_scan`), a compact copy
(:mod:`~qrag_integrations.core.compact_scan`), FAISS pre-selection
(:mod:`~qrag_integrations.core.faiss_preselect`), or a vector store's candidates
(:mod:`qrag_integrations.stores.search`). The executable specification of the search is
:mod:`~qrag_integrations.core.reference_search`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from qrag_integrations.core.chunks import Chunk, MetadataFilter
from qrag_integrations.core.compact_scan import EXACT, check_scan, compact_scorer
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.exact_scan import ExactScorer
from qrag_integrations.core.faiss_preselect import FaissScorer
from qrag_integrations.core.index import ChunkIndex, DocumentRotation, IndexCandidates
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.rules import POOL, Fusion, LexicalRanker, fusion_of, superseded
from qrag_integrations.core.step import C, Scored, Scorer, Step, pool_best
from qrag_integrations.core.threads import check_threads, search_threads


@dataclass(frozen=True)
class Hit:
    """One picked chunk."""

    chunk: Chunk
    """The chunk."""
    step: int
    """Search step (1-based) at which it was picked."""
    q_value: float
    """Q-value of the pick, ``Q1 + Q2``."""
    position: int
    """Position the chunk had when it was picked."""


# -- the search loop ----------------------------------------------------------------------------
def run_search(
    model: QRAGModel,
    policy: SearchPolicy,
    lexical: LexicalRanker,
    queries: Sequence[str],
    candidates: Sequence[C],
    k: int,
    stop_threshold: float | None,
    scorer: Scorer[C],
    shared: bool,
) -> list[list[Hit]]:
    """Greedy search of ``queries[b]`` over ``candidates[b]`` by ``model`` and ``policy`` (BM25
    from ``lexical``), each step's plain pick and pool from ``scorer``; ``shared`` = one candidate
    set for all (a step with one layout is one pass for the batch)."""
    if k < 1:
        raise QRAGError(f"k must be >= 1, got {k}")
    results: list[list[Hit]] = [[] for _ in queries]
    picked: list[list[int]] = [[] for _ in queries]  # local ranks in pick order
    active = [b for b in range(len(queries)) if candidates[b].n > 0]
    question_row: dict[int, int] = {}
    questions = torch.empty(0)
    fusion = fusion_of(
        lexical,
        candidates,
        queries,
        active,
        k,
        policy.lexical_depth or None,
        policy.lexical_steps,
        policy.lexical_gap,
        policy.lexical_weight,
    )
    for number in range(1, k + 1):
        active = [b for b in active if len(picked[b]) < candidates[b].n]
        if not active:
            break
        # the state: question and picks, anchored to the question, placed at the latest pick
        texts = [
            model.state_text(
                queries[b], [candidates[b].chunk(r).text for r in picked[b]], picked_order=picked[b]
            )
            for b in active
        ]
        with torch.inference_mode():
            states = model.embed_states(texts).to(torch.float32)
            if number == 1:  # the state is the bare question: keep it for anchoring
                questions, question_row = states, {b: i for i, b in enumerate(active)}
            else:
                states = model.anchor_states(states, questions[[question_row[b] for b in active]])
                last = torch.tensor([results[b][-1].position for b in active])
                states = model.place_states(states, last)
        taken = [picked[b] for b in active]
        step = Step(number, active, [candidates[b] for b in active], states, taken, shared)
        best = _picks(step, texts, scorer, fusion, policy)
        still = []
        for pick, b in zip(best, active):
            if pick is None:  # nothing left that this question may get
                continue
            rank, q, pos = pick
            if stop_threshold is not None and q < stop_threshold:
                continue
            picked[b].append(rank)
            cand = candidates[b]
            results[b].append(Hit(cand.chunk(rank), number, q, cand.position(rank, pos)))
            still.append(b)
        active = still
    return results


def _picks(
    step: Step[C],
    texts: list[str],
    scorer: Scorer[C],
    fusion: Fusion | None,
    policy: SearchPolicy,
) -> list[Scored | None]:
    """Each question's pick at ``step`` (``texts``: its state texts): from the candidate pool
    (Q's best untaken) where a rule reads it, by BM25 fusion or Q's best, a later restatement
    superseding it; else the scorer's arg-max."""
    fusing = fusion if fusion is not None and fusion.at(step.number) else None
    margin = policy.supersede_margin
    depth = POOL if margin is not None else fusing.depth if fusing is not None else None
    if depth is None:
        return scorer.picks(step)
    pools = scorer.pools(step, depth)
    best = fusing.picks(step, pools) if fusing is not None else [pool_best(p) for p in pools]
    if margin is None:
        return best
    return superseded(step, pools, best, texts, margin, policy.supersede_similarity)


# -- the in-memory search ---------------------------------------------------------------------
@dataclass
class SearchSettings:
    """How fast the multi-step search runs (what it does is its
    :class:`~qrag_integrations.core.policy.SearchPolicy`)."""

    block_size: int = 65536
    """Rows scored per matrix product; bounds temporary memory to ``block_size * batch`` floats."""
    faiss_candidates: int | None = None
    """If set, each step first takes this many candidates by FAISS inner product on unrotated
    embeddings, then re-scores them exactly with positions (approximate, for very large indexes)."""
    faiss_min_size: int = 200_000
    """FAISS pre-selection is used only for indexes at least this big."""
    faiss_factory: str = "Flat"
    """``faiss.index_factory`` string of the candidate index (``"Flat"``, ``"HNSW32"``, ...)."""
    scan: str = EXACT
    """How a step scans the index: ``"exact"`` (float32), or a compact copy that picks
    candidates for exact re-scoring: ``"int8"`` / ``"binary"``, or ``"bf16"`` for batches of
    questions (:mod:`~qrag_integrations.core.compact_scan`; CPU, positions ``none``, ``document`` or
    ``relative``; filtered searches scan exactly)."""
    rescore: int = 400
    """Compact scans: candidates re-scored exactly per question and step (the copy's best over all
    runs of equal positions)."""
    threads: int | None = None
    """Threads of a search (torch, ONNX Runtime, OpenVINO, FAISS, SimSIMD); ``None``: 1 below 8
    questions, else torch's count (:mod:`~qrag_integrations.core.threads`)."""

    def __post_init__(self) -> None:
        check_scan(self.scan, self.rescore)
        check_threads(self.threads)


class MultiStepSearcher:
    """Runs Q-RAG's greedy multi-step search for one model over one index."""

    def __init__(
        self,
        model: QRAGModel,
        index: ChunkIndex,
        settings: SearchSettings | None = None,
        policy: SearchPolicy | None = None,
    ) -> None:
        """Search ``index`` with ``model``, as fast as ``settings`` say, by ``policy`` (``None``:
        the policy the model's checkpoint recommends, :meth:`SearchPolicy.of`)."""
        if model.embedding_dim != index.embedding_dim:
            raise QRAGError(
                f"model embedding size {model.embedding_dim} != index embedding size {index.embedding_dim}"
            )
        self.model = model
        self.index = index
        self.settings = settings or SearchSettings()
        self.policy = SearchPolicy.of(model.config) if policy is None else policy
        self.exact = ExactScorer(model, self.settings.block_size)
        """The exact scorer of in-memory candidates (the exact picks and pools)."""
        self._lexical = LexicalRanker()
        self._searched = DocumentRotation(model.config)  # document mode's rotated snapshot
        self._compact = compact_scorer(
            self.exact, self.settings.scan, self.settings.rescore, index.device
        )
        want = self.settings.faiss_candidates
        self._faiss = (
            None if want is None else FaissScorer(self.exact, want, self.settings.faiss_factory)
        )

    # -- public -------------------------------------------------------------------------------
    def search(
        self,
        queries: Sequence[str],
        k: int,
        stop_threshold: float | None = None,
        filter: MetadataFilter | None = None,
        *,
        where: MetadataFilter | None = None,
    ) -> list[list[Hit]]:
        """Search several questions at once.

        Args:
            queries: question texts.
            k: maximum number of steps (= chunks returned per question).
            stop_threshold: stop a question's search before a pick whose Q-value is below this
                (it can then return nothing).
            filter: metadata filter (as the retriever's ``filter``); only matching chunks are
                candidates (positions are laid out over the matching chunks, which then form the
                "document").
            where: deprecated name of ``filter``.

        Returns:
            For each question, its hits in pick order: ``min(k, candidates)`` of them, fewer when
            ``stop_threshold`` stops early.
        """
        if where is not None:
            if filter is not None:
                raise QRAGError("pass filter= only (where= is its deprecated name)")
            warnings.warn(
                "MultiStepSearcher.search(where=) is deprecated; use filter=",
                DeprecationWarning,
                stacklevel=2,
            )
            filter = where
        with search_threads(len(queries), self.settings.threads):
            candidates = self._searched.candidates(self.index.snapshot(), filter)
            scorer = self._scorer_for(candidates)
            return self._run(queries, [candidates] * len(queries), k, stop_threshold, scorer, True)

    def search_each(
        self,
        queries: Sequence[str],
        indexes: Sequence[ChunkIndex],
        k: int,
        stop_threshold: float | None = None,
    ) -> list[list[Hit]]:
        """Search each question in its own index (e.g. a question's own paragraphs), with the
        states of all questions encoded together at every step.

        The same search as :meth:`search` (same picks, Q-values and stop rule as searching each
        question alone in its index); ``self.index`` is not used.
        """
        if len(indexes) != len(queries):
            raise QRAGError(f"got {len(queries)} queries but {len(indexes)} indexes")
        for index in indexes:
            if index.embedding_dim != self.model.embedding_dim:
                raise QRAGError(
                    f"model embedding size {self.model.embedding_dim} != index embedding size {index.embedding_dim}"
                )
        with search_threads(len(queries), self.settings.threads):
            candidates = [
                self._searched.candidates(i.snapshot(), None, keep=False) for i in indexes
            ]
            return self._run(queries, candidates, k, stop_threshold, self.exact, False)

    def _run(
        self,
        queries: Sequence[str],
        candidates: Sequence[IndexCandidates],
        k: int,
        stop_threshold: float | None,
        scorer: Scorer[IndexCandidates],
        shared: bool,
    ) -> list[list[Hit]]:
        return run_search(
            self.model,
            self.policy,
            self._lexical,
            queries,
            candidates,
            k,
            stop_threshold,
            scorer,
            shared,
        )

    # -- choices made once per search -----------------------------------------------------------
    def _scorer_for(self, candidates: IndexCandidates) -> Scorer[IndexCandidates]:
        """The scorer of a search over ``candidates`` shared by its questions: FAISS pre-selection
        over a big unfiltered index, else a compact copy of an unfiltered one, else exact."""
        unfiltered = candidates.rows is None
        if self._faiss is not None and unfiltered and candidates.n >= self.settings.faiss_min_size:
            return self._faiss
        if self._compact is not None and unfiltered:
            return self._compact
        return self.exact
