"""A later restatement supersedes a pick: the latest state of a changing fact.

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
interval, see ``benchmarks/general/results/explore_gate/``); their order took bAbI qa5 from 0.60
to 0.70 and the limit at a taken restatement qa3 from 0.37 to 0.52 on validation. The replacement
is reported with its own exact Q-value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from qrag_integrations.core.candidates import (
    CandidateSet,
    IndexCandidates,
    all_in_memory,
    own_settings_apply,
)
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.lexical import bm25_query, top_by_q, top_by_q_shared

if TYPE_CHECKING:
    from qrag_integrations.core.search import MultiStepSearcher

#: A scored chunk of a step: ``(rank, Q, position)``.
Scored = tuple[int, float, int]

#: Q's best untaken chunks that may replace a pick (the validated setting; restatements within
#: the margin rank near the pick).
POOL = 32

#: The margin of ``SearchSettings(supersede=True)`` for a model whose config sets none (the
#: default checkpoint's, chosen on validation).
DEFAULT_MARGIN = 0.05


def terms(text: str) -> set[str]:
    """``text``'s BM25 terms (bm25s tokens, English stop words removed), as a set."""
    return set(bm25_query(text)[0])


def search_margin(searcher: MultiStepSearcher, candidates: Sequence[CandidateSet]) -> float | None:
    """The margin a search supersedes picks with, ``None`` where it does not.

    ``SearchSettings.supersede=False``: never. ``True``: always (the model's margin, else
    :data:`DEFAULT_MARGIN`), every step then scanning exactly (:func:`pools`) whatever the scan
    setting.
    ``None``: the model's ``supersede_margin`` where the search scans exactly (no compact scan, no
    FAISS pre-selection, which are there to avoid exact scans).

    Raises:
        QRAGError: ``supersede`` is not a bool or ``None``, or it is ``True`` for candidates that
            are not an in-memory index's (a store-backed search).
    """
    flag, margin = searcher.settings.supersede, searcher.model.config.supersede_margin
    if not (flag is None or isinstance(flag, bool)):
        raise QRAGError(f"supersede must be True, False or None, got {flag!r}")
    if flag is False or (flag is None and margin is None):
        return None
    if flag:
        if not all_in_memory(candidates):
            raise QRAGError("supersede=True searches an in-memory index only")
        return DEFAULT_MARGIN if margin is None else margin
    return margin if own_settings_apply(searcher, candidates) else None


def superseding_pick(
    searcher: MultiStepSearcher,
    cands: IndexCandidates,
    pool: list[Scored],
    picked: list[int],
    pick: Scored,
    state_text: str,
    margin: float,
) -> Scored:
    """``pick`` (``(rank, Q, position)``), or the latest later restatement of it in its document.

    Args:
        searcher: the search (its model's ``supersede_similarity``).
        cands: the question's candidates (ranks in document order).
        pool: Q's :data:`POOL` best untaken chunks for the state the pick was scored with
            (:func:`pools`).
        picked: ranks picked before this step.
        pick: the step's pick.
        state_text: the state text of this step (question and earlier picks).
        margin: how far below the pick's Q-value a restatement may score.
    """
    cfg = searcher.model.config
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
    same = restating(
        cands, rank, [r for r, _, _ in close] + taken, shared, cfg.supersede_similarity
    )
    # past a restatement already taken, the pick is deliberate: an earlier state is asked for
    limit = min((t for t in taken if t in same), default=cands.n)
    later = [hit for hit in close if hit[0] in same and hit[0] < limit]
    return max(later) if later else pick


def in_order(text: str, shared: set[str]) -> list[str]:
    """The ``shared`` terms that ``text`` names, in the order it first names them."""
    return list(dict.fromkeys(t for t in bm25_query(text)[0] if t in shared))


def restating(
    cands: IndexCandidates, rank: int, others: list[int], shared: set[str], similarity: float
) -> set[int]:
    """Those of ``others`` (ranks) that restate chunk ``rank``: cosine of the unrotated chunk
    embeddings >= ``similarity``, and every one of the ``shared`` terms (``rank`` holds them
    all) in the order ``rank`` names them."""
    # only the rows compared, never the whole matrix (a copy of every embedding per pick)
    rows = torch.tensor([rank, *others], device=cands.unrotated.device)
    unit = torch.nn.functional.normalize(cands.unrotated[rows].float(), dim=-1)
    cosines = (unit[1:] @ unit[0]).tolist()
    order = in_order(cands.chunk(rank).text, shared)
    return {
        other
        for other, cosine in zip(others, cosines)
        if cosine >= similarity and in_order(cands.chunk(other).text, shared) == order
    }


def pools(
    searcher: MultiStepSearcher,
    candidates: Sequence[CandidateSet],
    active: list[int],
    states: torch.Tensor,
    picked: list[list[int]],
    one_layout: bool,
    margin: float | None,
) -> list[list[Scored]] | None:
    """Q's :data:`POOL` best untaken ``(rank, Q, position)`` for each active question's state,
    best first, where the rule is on (``margin``, :func:`search_margin`; ``None``: off). The one
    exact scan of a step with the rule: it gives the step's pick too (:func:`pool_best`), so the
    rule costs no scan of its own. ``one_layout``: every question shares ``candidates[0]`` and its
    layout (the batch is scanned in one pass)."""
    if margin is None:
        return None
    if one_layout:
        taken = [picked[b] for b in active]
        tops = top_by_q_shared(searcher, candidates[0], states, taken, POOL)  # type: ignore[arg-type]
        if tops is not None:
            return tops
    return [
        top_by_q(searcher, candidates[b], states[i], picked[b], POOL)  # type: ignore[arg-type]
        for i, b in enumerate(active)
    ]


def pool_best(pool: list[Scored]) -> Scored | None:
    """The step's pick from its pool: the best Q, the lowest rank among equal ones (as every scan
    of the search breaks ties); ``None`` when nothing is left."""
    if not pool:
        return None
    return min((hit for hit in pool if hit[1] == pool[0][1]), key=lambda hit: hit[0])


def superseded(
    searcher: MultiStepSearcher,
    candidates: Sequence[CandidateSet],
    active: list[int],
    pool: list[list[Scored]],
    picked: list[list[int]],
    best: list[Scored | None],
    texts: list[str],
    margin: float,
) -> list[Scored | None]:
    """One step's picks after the rule: ``best[i]`` is question ``active[i]``'s pick (``None``:
    nothing left), ``pool[i]`` its state's :func:`pools` entry, ``texts[i]`` its state text;
    every candidate set is an in-memory one (:func:`search_margin` returned ``margin``)."""
    return [
        pick
        and superseding_pick(
            searcher,
            candidates[b],  # type: ignore[arg-type]
            pool[i],
            picked[b],
            pick,
            texts[i],
            margin,
        )
        for i, (b, pick) in enumerate(zip(active, best))
    ]
