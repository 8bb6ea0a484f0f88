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
interval, ``docs/decisions.md``, 2026-11-27); their order took bAbI qa5 from 0.60 to 0.70 and the
limit at a taken restatement qa3 from 0.37 to 0.52 on validation. The replacement is reported with
its own exact Q-value.

The rule reads only the step's pool (Q's :data:`POOL` best untaken chunks, which the search's
scorer gives: :meth:`~qrag_integrations.core.step.Scorer.pools`), the chunks' texts
and their unrotated embeddings: it costs no scan of its own.
"""

from __future__ import annotations

import torch

from qrag_integrations.core.lexical import bm25_query
from qrag_integrations.core.step import C, CandidateSet, Scored, Step

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
