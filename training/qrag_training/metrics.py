"""Retrieval metrics of the trainer, ``qrag-eval`` and the benchmarks: one vocabulary.

Per episode: fact EM (every supporting chunk picked) and fact F1 (picked vs supporting chunk ids).
Over a set (:func:`summarize`): ``fact_em``, ``fact_f1``, ``fact_em_at_facts`` (fact EM of the
first picks only, as many as the episode has facts), ``mean_steps``, ``n`` and (with a feedback)
``reward``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from qrag_training.data.episode import Episode
from qrag_training.feedback import Feedback, RewardQuery, score_picks


def fact_metrics(picked: Sequence[int], support: Sequence[int]) -> tuple[float, float]:
    """``(fact EM, fact F1)`` of picked chunk ids against supporting ids.

    EM is 1 when every supporting chunk was picked (extra picks allowed), F1 is the F1 of the two
    id sets (0 when nothing was picked or there is no support).
    """
    got, gold = {int(i) for i in picked}, {int(i) for i in support}
    if not gold:
        return 0.0, 0.0
    em = float(gold.issubset(got))
    hit = len(got & gold)
    if not got or not hit:
        return em, 0.0
    precision, recall = hit / len(got), hit / len(gold)
    return em, 2 * precision * recall / (precision + recall)


@dataclass
class Retrieval:
    """What a retriever returned for one episode."""

    picked: list[int]
    """Chunk ids in pick (or rank) order."""
    scores: list[float] = field(default_factory=list)
    """Score of each pick: Q-value (multi-step), cosine (dense) or BM25 score."""


def summarize(
    episodes: Sequence[Episode], results: Sequence[Retrieval], feedback: Feedback | None = None
) -> dict[str, float]:
    """Mean fact EM / F1 (over the episodes with supporting facts), fact EM of the first picks only
    (as many as the episode has facts: ``fact_em_at_facts``), mean number of picks and
    (with a feedback) mean episode reward, all rewards asked in one batch
    (:func:`~qrag_training.feedback.score_picks`)."""
    labeled = [(e, r) for e, r in zip(episodes, results) if e.support]
    facts = [fact_metrics(r.picked, e.support) for e, r in labeled]
    out = {
        "fact_em": float(np.mean([em for em, _ in facts])) if facts else 0.0,
        "fact_f1": float(np.mean([f1 for _, f1 in facts])) if facts else 0.0,
        # precision of the first picks: EM when only as many picks count as there are facts
        "fact_em_at_facts": (
            float(
                np.mean(
                    [fact_metrics(r.picked[: len(e.support)], e.support)[0] for e, r in labeled]
                )
            )
            if labeled
            else 0.0
        ),
        "mean_steps": float(np.mean([len(r.picked) for r in results])) if results else 0.0,
        "n": len(results),
    }
    if len(labeled) < len(results):
        out["n_fact"] = len(labeled)
    if feedback is not None:
        queries, owner = [], []
        for i, (episode, result) in enumerate(zip(episodes, results)):
            for k in range(1, len(result.picked) + 1):
                queries.append(
                    RewardQuery(episode, tuple(result.picked[:k]), final=k == len(result.picked))
                )
                owner.append(i)
        rewards = np.zeros(len(results))
        np.add.at(
            rewards, np.asarray(owner, dtype=np.int64), np.asarray(score_picks(feedback, queries))
        )
        out["reward"] = float(rewards.mean()) if len(results) else 0.0
    return out
