"""Retrieval metrics of the trainer, ``qrag-eval`` and the benchmarks: one vocabulary.

Per episode: fact EM (every supporting chunk picked) and fact F1 (picked vs supporting chunk ids).
Over a set (:func:`summarize`): ``fact_em``, ``fact_f1``, ``fact_em_at_facts`` (fact EM of the
first picks only, as many as the episode has facts), ``mean_steps``, ``n`` and (with a feedback)
``reward``. The benchmarks' ``em`` / ``recall`` (:func:`em_recall`) are the same fact EM and the
mean share of supporting chunks picked, and their ``stop_threshold`` rows (:func:`stop_metrics`)
cut picks by the search's own stop rule.
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


def fact_recall(picked: Sequence[int], support: Sequence[int]) -> float:
    """Share of the supporting chunk ids that were picked (0 when there is no support)."""
    gold = {int(i) for i in support}
    return len(gold & {int(i) for i in picked}) / len(gold) if gold else 0.0


def em_recall(picks: Sequence[Sequence[int]], gold: Sequence[Sequence[int]]) -> tuple[float, float]:
    """Mean fact EM and mean fact recall over questions (:func:`fact_metrics`, :func:`fact_recall`)."""
    em = float(np.mean([fact_metrics(p, g)[0] for p, g in zip(picks, gold)]))
    recall = float(np.mean([fact_recall(p, g) for p, g in zip(picks, gold)]))
    return em, recall


def cut_at_stop(
    picks: Sequence[Sequence[int]], q_values: Sequence[Sequence[float]], threshold: float
) -> list[list[int]]:
    """What a search with ``stop_threshold=threshold`` returns, from a longer search's picks.

    The search (:class:`~qrag_integrations.core.search.MultiStepSearcher`) stops before the first
    pick whose Q-value is below the threshold, and nothing before that pick depends on it, so this
    cut of a longer search's picks is exactly what a search with the threshold returns."""
    kept = []
    for p, q in zip(picks, q_values):
        cut = next((i for i, v in enumerate(q) if v < threshold), len(q))
        kept.append(list(p[:cut]))
    return kept


def stop_metrics(
    picks: Sequence[Sequence[int]],
    q_values: Sequence[Sequence[float]],
    gold: Sequence[Sequence[int]],
    threshold: float,
) -> dict[str, float]:
    """``em``, ``recall`` and ``mean_steps`` of the picks :func:`cut_at_stop` keeps."""
    kept = cut_at_stop(picks, q_values, threshold)
    em, recall = em_recall(kept, gold)
    return {
        "stop_threshold": threshold,
        "em": em,
        "recall": recall,
        "mean_steps": float(np.mean([len(p) for p in kept])),
    }


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
