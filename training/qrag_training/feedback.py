"""Rewards for retrieval episodes.

A :class:`Feedback` turns "the chunks picked so far" into a reward and says whether the episode
is over. It is stateless: everything it needs is the episode and the list of picks (in pick
order), so one object serves any number of parallel environments.

:class:`GroundTruthFeedback` is the paper's reward from supporting-fact labels. An LLM-answer
reward (a reader model answers from the picked chunks; reward = answer exact match / F1, the
paper's future work and the only option for corpora without support labels) plugs into the same
protocol (:class:`qrag_training.llm_feedback.LLMAnswerFeedback`): it scores the answer when
``final`` is true (or at every step), sets ``requires_support = False`` and implements the batch
hook ``rewards(queries)`` (:class:`BatchFeedback`), through which the vectorised environment asks
for the rewards of all its environments at once (:func:`score_picks`), so one reader call serves
every environment whose episode ends on a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from qrag_training.data.episode import Episode


@runtime_checkable
class Feedback(Protocol):
    """What the environment asks after every pick."""

    never_terminate: bool
    """If true, episodes always run to the step cap (a truncation); otherwise
    :meth:`terminal` may end them early (a termination: no value after it)."""
    requires_support: bool
    """Whether episodes must carry supporting-fact labels (``Episode.support``)."""

    def reward(
        self, episode: Episode, picked: Sequence[int], step: int, final: bool = False
    ) -> float:
        """Reward for the latest pick.

        Args:
            episode: the episode being played.
            picked: chunk indices picked so far, in pick order; ``picked[-1]`` is the latest.
            step: 1-based number of the latest pick (``len(picked)``).
            final: true when this pick is the last one of the episode (step cap reached or no
                chunk left); an answer-based reward can score the reader's answer here.
        """
        ...

    def terminal(self, episode: Episode, picked: Sequence[int]) -> bool:
        """Whether the episode is solved and should end here (ignored if ``never_terminate``)."""
        ...


@dataclass(frozen=True)
class RewardQuery:
    """One reward to compute: the arguments of :meth:`Feedback.reward` for one environment."""

    episode: Episode
    """The episode being played."""
    picked: tuple[int, ...]
    """Chunk indices picked so far, in pick order."""
    final: bool = False
    """This pick is the last one of the episode."""

    @property
    def step(self) -> int:
        """1-based number of the latest pick."""
        return len(self.picked)


@runtime_checkable
class BatchFeedback(Feedback, Protocol):
    """A feedback that computes many rewards in one call (e.g. one batched reader call)."""

    def rewards(self, queries: Sequence[RewardQuery]) -> list[float]:
        """``rewards(queries)[i]`` is ``reward(q.episode, q.picked, q.step, q.final)`` for
        ``q = queries[i]``."""
        ...


def score_picks(feedback: Feedback, queries: Sequence[RewardQuery]) -> list[float]:
    """The rewards of ``queries``: one :meth:`BatchFeedback.rewards` call when the feedback has
    the batch hook, else :meth:`Feedback.reward` query by query."""
    if not queries:
        return []
    if isinstance(feedback, BatchFeedback):
        return [float(r) for r in feedback.rewards(queries)]
    return [
        float(feedback.reward(q.episode, list(q.picked), q.step, final=q.final)) for q in queries
    ]


class GroundTruthFeedback:
    """Reward from supporting-fact labels (the paper's reward).

    0 per step; once, at the pick that first completes the set of supporting facts: 1.0, or with
    ``penalize_extra_steps`` ``0.5 + 0.5 * |support| / |picked|``. With ``per_fact_shaping`` each
    newly picked supporting fact also earns ``per_fact_reward``.
    """

    requires_support = True

    def __init__(
        self,
        penalize_extra_steps: bool = True,
        per_fact_shaping: bool = False,
        per_fact_reward: float = 0.1,
        completion_reward: float = 1.0,
        never_terminate: bool = True,
    ) -> None:
        self.penalize_extra_steps = penalize_extra_steps
        self.per_fact_shaping = per_fact_shaping
        self.per_fact_reward = per_fact_reward
        self.completion_reward = completion_reward
        self.never_terminate = never_terminate

    @staticmethod
    def completed(episode: Episode, picked: Sequence[int]) -> bool:
        """Whether every supporting fact is among ``picked`` (false for unlabeled episodes)."""
        return bool(episode.support) and set(episode.support).issubset(picked)

    def reward(
        self, episode: Episode, picked: Sequence[int], step: int, final: bool = False
    ) -> float:
        """See :meth:`Feedback.reward`."""
        if not picked:
            return 0.0
        support = set(episode.support)
        latest = picked[-1]
        value = 0.0
        if self.per_fact_shaping and latest in support and latest not in picked[:-1]:
            value += self.per_fact_reward
        if self.completed(episode, picked) and not self.completed(episode, picked[:-1]):
            if self.penalize_extra_steps:
                value += self.completion_reward * (0.5 + 0.5 * len(support) / len(set(picked)))
            else:
                value += self.completion_reward
        return value

    def terminal(self, episode: Episode, picked: Sequence[int]) -> bool:
        """See :meth:`Feedback.terminal`: solved once every supporting fact is picked."""
        return self.completed(episode, picked)
