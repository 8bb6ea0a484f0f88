"""The search's rules: what a step does with its pool (Q's best untaken chunks) before it
picks. Their values are the policy's (:class:`~qrag_integrations.core.policy.SearchPolicy`).

**Lexical fusion: the policy's Q ranking fused with BM25 of the question.**

A fused step ranks the ``depth`` best untaken chunks by Q (the state of that step) and the
``depth`` best untaken chunks by BM25 of the bare question, and picks the best by reciprocal
rank fusion, ``1 / (60 + rank)`` from each ranking (LangChain's ``EnsembleRetriever`` fuses
a dense and a BM25 retriever the same way, once). The pick is therefore always one of the Q
ranking's ``depth`` best, re-ordered by BM25: a chunk that only BM25 ranks scores at most
``1 / 61``, which Q's best chunk always reaches (and equals win in Q's order). The reported
Q-value is the pick's exact Q.

With a ``lexical_weight`` the fusion is by score instead of rank: the pick is the best of the
same ``depth`` by ``Q + weight * BM25 / top``, ``top`` the question's best BM25 among the
candidates, so a chunk BM25 ranks first gains ``weight`` over one that names no question term.
A rank keeps no trace of how far apart two scores lie; a score does, which lets a strong lexical
match overturn a small Q lead and leaves a large one alone.

The first ``lexical_steps`` steps fuse always; with a ``lexical_gap`` a later step fuses only when
the policy is unsure there, its two best untaken chunks within that Q gap of each other (else
Q's best is the pick, as without fusion), and its BM25 ranking then counts only chunks that name
a question term that no pick names yet (stop words never count:
:mod:`~qrag_integrations.core.stopwords`). After a first pick, a multi-hop question's next hop is
mostly a clear best by Q, which BM25 of the question (it does not name the bridge) would push
down; a single-hop question whose answer was missed leaves Q near-flat, and there the question's
words find it; once the picks name every question term, BM25 has nothing left to add (the
third fact of "Where was the apple before the kitchen?" names neither word). The gap was chosen on
validation splits (``docs/decisions.md``, 2026-11-28).

BM25 comes from ``bm25s`` (English stop words; a dependency), one index per corpus the
candidates were drawn from (an in-memory snapshot, or every chunk of a vector store), built on
first use and rebuilt when the corpus changes; a filter restricts the ranking, not the terms'
statistics, so a filtered search ranks alike in memory and over a store.

**A later restatement supersedes a pick: the latest state of a changing fact.**

Text that records changes restates the same fact with a new value ("Mary went to the kitchen"
... "Mary went to the garden"; a setting changed in a later release note; a plan revised later in
a chat). Such restatements score nearly the same Q-value, and a policy that reads positions only
weakly picks among them almost at random. After each pick ``p`` the search therefore takes, when
there is one, the *latest* chunk ``c`` of ``p``'s document that restates it:

- ``c`` comes after ``p`` in the document and is among Q's :data:`POOL` best untaken chunks;
- ``Q(c) >= Q(p) - margin`` (``QRAGConfig.supersede_margin``);
- the cosine of their chunk embeddings (unrotated) is at least ``QRAGConfig.supersede_similarity``;
- ``c`` names every BM25 term that ``p`` shares with the state text (question and earlier
  picks) in the order ``p`` names them ("Jeff passed the football to Fred." does not restate
  "Fred handed the football to Jeff." for "Who did Fred give the football to?"); a pick that
  shares none is kept;
- no chunk already taken lies between ``p`` and ``c`` that restates ``p`` (the last two
  conditions). A pick made after a later restatement of it was taken is deliberate: the question
  asks for an earlier state ("Where was the apple before the kitchen?").

The terms keep paragraphs of one article that merely look alike from replacing each other (on
SQuAD validation the cosine alone cost 0.03-0.09 hit@1; with the terms it stays within the paired
interval, ``docs/decisions.md``, 2026-11-27); their order took bAbI qa5 from 0.60 to 0.70 and the
limit at a taken restatement qa3 from 0.37 to 0.52 on validation. The replacement is reported with
its own exact Q-value.

The rule reads only the step's pool (Q's :data:`POOL` best untaken chunks, which the search's
scorer gives: :meth:`~qrag_integrations.core.step.Scorer.pools`), the chunks' texts
and their unrotated embeddings: it costs no scan of its own.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.chunks import BuiltFor
from qrag_integrations.core.errors import optional_import
from qrag_integrations.core.step import C, CandidateSet, CorpusTexts, Scored, Step
from qrag_integrations.core.stopwords import ENGLISH_STOP_WORDS

#: The constant of reciprocal rank fusion (as in the RRF paper and LangChain's EnsembleRetriever).
RRF_C = 60


@functools.cache  # once: the logger level below is set right after the first import only
def _bm25s() -> Any:
    bm25s = optional_import("bm25s", "lexical fusion", "lexical")
    # bm25s sets its own logger to DEBUG on import, which logs a line for every index built (one
    # per question in evaluations); keep the import's level from flooding, not a level a user set
    log = logging.getLogger("bm25s")
    if log.level == logging.DEBUG:
        log.setLevel(logging.WARNING)
    return bm25s


def bm25_index(texts: Sequence[str]) -> Any:
    """A ``bm25s`` index of ``texts`` (English stop words), as every BM25 of ours is built."""
    bm25s = _bm25s()
    index = bm25s.BM25()
    index.index(
        bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False
    )
    return index


#: How every text is tokenized for BM25: English stop words out, tokens as strings.
TOKENS = {"stopwords": "en", "return_ids": False, "show_progress": False}


def bm25_query(question: str) -> list[list[str]]:
    """``question``'s tokens for :func:`bm25_index`'s indexes (a batch of one)."""
    return _bm25s().tokenize([question], **TOKENS)


class LexicalRanker:
    """BM25 rankings of questions over the corpus texts of the candidates searched (thread-safe):
    an in-memory snapshot's, or a vector store's (:meth:`CandidateSet.corpus`)."""

    def __init__(self) -> None:
        # an index is kept for the corpus last searched: a snapshot's by its embeddings (a new
        # snapshot has new ones, so a stale index is never used), a store's by its key
        self._slot = BuiltFor()
        self._lock = threading.Lock()
        self._keyed: tuple[object, Any] | None = None

    def _index(self, corpus: CorpusTexts) -> Any:
        def build() -> Any:
            return bm25_index(corpus.texts())

        if isinstance(corpus.key, torch.Tensor):
            return self._slot.get(corpus.key, build)
        with self._lock:
            if self._keyed is None or self._keyed[0] != corpus.key:
                self._keyed = (corpus.key, build())
            return self._keyed[1]

    def _scores(self, cands: CandidateSet, tokens: list[str]) -> np.ndarray:
        """BM25 of ``tokens`` for each candidate (document order among ``cands``)."""
        corpus = cands.corpus()
        scores = np.asarray(self._index(corpus).get_scores(tokens), dtype=np.float64)
        return scores if corpus.rows is None else scores[corpus.rows]

    def ranking(self, cands: CandidateSet, question: str, limit: int | None = None) -> np.ndarray:
        """Candidate ranks (document order among ``cands``) with a positive BM25 score for
        ``question``, best first (ties in document order); the first ``limit`` of them when given
        (a search needs its depth plus its fused steps' picks, not a sort of every hit)."""
        scores = self._scores(cands, bm25_query(question)[0])
        return _head(scores, scores > 0, limit)

    def scores(self, cands: CandidateSet, question: str) -> np.ndarray:
        """BM25 of ``question`` for each candidate (document order among ``cands``)."""
        return self._scores(cands, bm25_query(question)[0])

    def novel(
        self, cands: CandidateSet, question: str, picked: Sequence[int], limit: int | None = None
    ) -> np.ndarray:
        """:meth:`ranking` of ``question`` cut to the chunks that name a term of it that no picked
        chunk names (a chunk names a term when the term's BM25 for it is positive); terms in
        :data:`~qrag_integrations.core.stopwords.ENGLISH_STOP_WORDS` never count. Ranked per
        call, not cut from a stored whole ranking: a batch would hold every hit of each question."""
        scores, names = self.novel_scores(cands, question, picked)
        return _head(scores, names, limit)

    def novel_scores(
        self, cands: CandidateSet, question: str, picked: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 of ``question`` for each candidate (document order among ``cands``), and whether
        each names a term of it that no picked chunk names (as :meth:`novel`)."""
        texts = [cands.chunk(r).text for r in picked]
        covered = set().union(*_bm25s().tokenize(texts, **TOKENS)) if texts else set()
        covered |= ENGLISH_STOP_WORDS
        tokens = bm25_query(question)[0]
        scores = self._scores(cands, tokens)
        rest = [t for t in tokens if t not in covered]
        if not rest:
            return scores, np.zeros(scores.shape, dtype=bool)
        return scores, (scores > 0) & (self._scores(cands, rest) > 0)


def _head(scores: np.ndarray, hits: np.ndarray, limit: int | None) -> np.ndarray:
    """The candidates where ``hits`` holds, best ``scores`` first (ties in document order); the
    first ``limit`` of them when given."""
    rows = np.flatnonzero(hits)
    if limit is not None and limit < rows.size:
        # every row scoring at least the limit-th best: the same first ``limit`` as a full stable
        # sort, ties at the cut included
        cut = np.partition(scores[rows], rows.size - limit)[rows.size - limit]
        rows = rows[scores[rows] >= cut]
    return rows[np.argsort(-scores[rows], kind="stable")][:limit]


def rrf_scores(*rankings: Sequence[int]) -> dict[int, float]:
    """Reciprocal rank fusion of ``rankings`` (best first): each item's sum of
    ``1 / (RRF_C + rank)`` over the rankings it is in (rank from 1), keyed in first-seen order, so
    ``max`` and stable sorts break ties toward the first ranking's order."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for i, item in enumerate(ranking):
            score[item] = score.get(item, 0.0) + 1.0 / (RRF_C + i + 1)
    return score


def fused_best(
    dense: list[Scored], lexical: np.ndarray, picked: list[int], depth: int
) -> Scored | None:
    """The pick ``(rank, Q, position)`` of one step by reciprocal rank fusion of the Q ranking
    ``dense`` (the ``depth`` best untaken by Q, best first) and the question's BM25 ranking
    ``lexical``; ``None`` when nothing is left."""
    if not dense:
        return None
    taken = set(picked)
    # read the ranking only as far as needed (a caller may pass a whole one)
    words = list(itertools.islice((r for r in map(int, lexical) if r not in taken), depth))
    score = rrf_scores([r for r, _, _ in dense], words)
    # first of equals: the Q ranking's order, so the best is one of ``dense`` (module docstring)
    best = max(score, key=score.__getitem__)
    return next(hit for hit in dense if hit[0] == best)


def weighted_best(
    dense: list[Scored], lexical: np.ndarray, top: float, weight: float
) -> Scored | None:
    """The pick of one step by score fusion: the best of ``dense`` (Q's best untaken, best first)
    by ``Q + weight * lexical[rank] / top`` (``lexical``: BM25 per candidate, ``top`` the
    question's best; ``top <= 0`` leaves Q's order); first of equals in Q's order; ``None`` when
    nothing is left."""
    if not dense:
        return None
    if top <= 0:
        return dense[0]
    fused = [q + weight * float(lexical[r]) / top for r, q, _ in dense]
    return dense[max(range(len(dense)), key=fused.__getitem__)]


@dataclass(frozen=True)
class Fusion:
    """Where one search fuses BM25 of its questions (:func:`fusion_of`)."""

    ranker: LexicalRanker
    """The BM25 rankings of the searched corpus."""
    questions: Sequence[str]
    """The questions."""
    words: dict[int, np.ndarray]
    """Each question's BM25 ranking (:meth:`LexicalRanker.ranking`) as deep as the first steps
    need, by question number."""
    depth: int
    """Chunks taken from each ranking (``lexical_depth``)."""
    steps: int
    """The first steps, which fuse always (``lexical_steps``)."""
    gap: float | None
    """A later step fuses where Q's two best untaken lie within this gap (``lexical_gap``)."""
    weight: float = 0.0
    """Fuse by score, ``Q + weight * BM25 / top`` (``lexical_weight``); 0: by rank."""

    def at(self, step: int) -> bool:
        """Whether step ``step`` (from 1) may fuse."""
        return step <= self.steps or self.gap is not None

    def picks(self, step: Step[C], pools: list[list[Scored]]) -> list[Scored | None]:
        """The fused pick of each question of ``step`` from Q's best untaken chunks of its state
        (``pools[i]``, at least :attr:`depth` deep where that many are left). In the first
        :attr:`steps` steps :func:`fused_best`; later, Q's best where it leads the next by at
        least :attr:`gap`, else :func:`fused_best` with the question's ranking cut to chunks that
        name a question term no pick names (:meth:`LexicalRanker.novel`)."""
        gap = self.gap if step.number > self.steps else None
        best: list[Scored | None] = []
        for b, cands, picked, pool in zip(step.active, step.candidates, step.picked, pools):
            dense = pool[: self.depth]
            sure = (
                gap is not None and dense and (len(dense) == 1 or dense[0][1] - dense[1][1] >= gap)
            )
            if sure:
                best.append(dense[0])  # the policy is sure here
                continue
            if self.weight and dense:
                best.append(self._weighted(self.questions[b], cands, picked, dense, gap))
                continue
            words = self.words[b]
            if gap is not None and dense:
                # enough of the cut ranking for ``depth`` untaken
                words = self.ranker.novel(
                    cands,
                    self.questions[b],
                    picked,
                    self.depth + len(picked),
                )
            best.append(fused_best(dense, words, picked, self.depth))
        return best

    def _weighted(
        self,
        question: str,
        cands: CandidateSet,
        picked: Sequence[int],
        dense: list[Scored],
        gap: float | None,
    ) -> Scored | None:
        """:func:`weighted_best` of one question: BM25 of the question in the first steps, later
        (``gap`` set) only of the chunks that name a question term no pick names."""
        if gap is None:
            whole = self.ranker.scores(cands, question)
            return weighted_best(dense, whole, float(whole.max(initial=0.0)), self.weight)
        whole, names = self.ranker.novel_scores(cands, question, picked)
        lexical = np.where(names, whole, 0.0)
        return weighted_best(dense, lexical, float(whole.max(initial=0.0)), self.weight)


def fusion_of(
    ranker: LexicalRanker,
    candidates: Sequence[CandidateSet],
    questions: Sequence[str],
    active: Sequence[int],
    k: int,
    depth: int | None,
    steps: int | None,
    gap: float | None,
    weight: float = 0.0,
) -> Fusion | None:
    """The fusion of a search of ``k`` steps over ``candidates[b]`` for ``questions[b]`` (``b`` in
    ``active``) at ``depth`` (``None``: none), fusing always in the first ``steps`` (``None``:
    every step) and after them where Q's two best lie within ``gap`` (``None`` or 0: never); by
    score at ``weight`` (0: by rank)."""
    if depth is None:
        return None
    steps = min(k, steps or k)
    gap = (gap or None) if steps < k else None
    # as deep as the first steps' fusion by rank may go (a fusion by score reads scores per step)
    words = (
        {}
        if weight
        else {b: ranker.ranking(candidates[b], questions[b], depth + steps) for b in active}
    )
    return Fusion(ranker, questions, words, depth, steps, gap, weight)


# -- a later restatement supersedes a pick ------------------------------------------------
#: Q's best untaken chunks that may replace a pick (the validated setting; restatements within
#: the margin rank near the pick).
POOL = 32


def terms(text: str) -> set[str]:
    """``text``'s BM25 terms (bm25s tokens, English stop words removed), as a set."""
    return set(bm25_query(text)[0])


def superseding_pick(
    cands: CandidateSet,
    pool: list[Scored],
    picked: list[int],
    pick: Scored,
    state_text: str,
    margin: float,
    similarity: float,
) -> Scored:
    """``pick`` (``(rank, Q, position)``), or the latest later restatement of it in its document.

    Args:
        cands: the question's candidates (ranks in document order).
        pool: Q's :data:`POOL` best untaken chunks for the state the pick was scored with.
        picked: ranks picked before this step.
        pick: the step's pick.
        state_text: the state text of this step (question and earlier picks).
        margin: how far below the pick's Q-value a restatement may score.
        similarity: the least cosine of a restatement (the model's ``supersede_similarity``).
    """
    rank, q, _ = pick
    shared = terms(state_text) & terms(cands.chunk(rank).text)
    if not shared:
        return pick
    doc = cands.chunk(rank).doc_id
    close = [
        hit
        for hit in pool
        if hit[0] > rank and hit[1] >= q - margin and cands.chunk(hit[0]).doc_id == doc
    ]
    if not close:
        return pick
    taken = [t for t in picked if t > rank and cands.chunk(t).doc_id == doc]
    same = restating(cands, rank, [r for r, _, _ in close] + taken, shared, similarity)
    # past a restatement already taken, the pick is deliberate: an earlier state is asked for
    limit = min((t for t in taken if t in same), default=cands.n)
    later = [hit for hit in close if hit[0] in same and hit[0] < limit]
    return max(later) if later else pick


def in_order(text: str, shared: set[str]) -> list[str]:
    """The ``shared`` terms that ``text`` names, in the order it first names them."""
    return list(dict.fromkeys(t for t in bm25_query(text)[0] if t in shared))


def restating(
    cands: CandidateSet, rank: int, others: list[int], shared: set[str], similarity: float
) -> set[int]:
    """Those of ``others`` (ranks) that restate chunk ``rank``: cosine of the unrotated chunk
    embeddings >= ``similarity``, and every one of the ``shared`` terms (``rank`` holds them
    all) in the order ``rank`` names them."""
    unit = torch.nn.functional.normalize(cands.vectors([rank, *others]).float(), dim=-1)
    cosines = (unit[1:] @ unit[0]).tolist()
    order = in_order(cands.chunk(rank).text, shared)
    return {
        other
        for other, cosine in zip(others, cosines)
        if cosine >= similarity and in_order(cands.chunk(other).text, shared) == order
    }


def superseded(
    step: Step[C],
    pools: list[list[Scored]],
    best: list[Scored | None],
    texts: list[str],
    margin: float,
    similarity: float,
) -> list[Scored | None]:
    """One step's picks after the rule: ``best[i]`` is the ``i``-th question's pick (``None``:
    nothing left), ``pools[i]`` its state's :data:`POOL` best, ``texts[i]`` its state text."""
    return [
        pick and superseding_pick(cands, pool, picked, pick, text, margin, similarity)
        for cands, pool, picked, pick, text in zip(step.candidates, pools, step.picked, best, texts)
    ]
