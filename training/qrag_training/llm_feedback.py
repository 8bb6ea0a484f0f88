"""The LLM-answer reward (``feedback=llm``): a reader answers from the picked chunks.

The reward is the exact match, token F1 or BabiLong label match (bAbI data) of the reader's
answer against the episode's gold answer (the paper's future work, and the only reward for
corpora without supporting-fact labels):

* ``per_step=False`` (default): 0 until the episode's last pick, then ``score(picked)``;
* ``per_step=True``: at every pick the gain ``score(picked) - score(picked[:-1])`` with
  ``score([]) = 0``, so an episode's undiscounted return is its final score in both modes and
  the per-step rewards say which pick made the answer right (or wrong again).

Calls are batched: :meth:`LLMAnswerFeedback.rewards` (the :class:`~qrag_training.feedback.
BatchFeedback` hook the vectorised environment uses) gathers the prompts of every query that
needs an answer, drops the ones already answered, and asks the reader once. Answers are cached
(LRU) under the key ``(question, chunk texts in prompt order)``: texts rather than chunk ids
because ids are per-episode indices and bAbI questions repeat across episodes ("Where is
Mary?"); an ordered tuple rather than a set because the prompt, and so the answer, depends on
the order (with ``chunk_order=document`` the order is canonical, so every permutation of the
same picks shares one entry). The answer is cached, not the score, so EM and F1 come from the
same call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from qrag_integrations.llm import DEFAULT_TEMPLATE, Reader
from qrag_training.answering import (
    ANSWER_METRICS,
    answer_score,
    episode_prompt,
    generate_answers,
    load_reader,
    ordered,
)
from qrag_training.data.episode import Episode
from qrag_training.feedback import RewardQuery

#: Cache key: the question and the chunk texts in the order the reader sees them.
CacheKey = tuple[str, tuple[str, ...]]


class AnswerCache:
    """Least-recently-used map from :data:`CacheKey` to the reader's answer, with counters."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache size must be >= 0, got {size}")
        self.size = size
        self._answers: OrderedDict[CacheKey, str] = OrderedDict()
        self.hits = 0
        """Lookups answered from the cache."""
        self.misses = 0
        """Lookups that needed the reader."""

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: CacheKey) -> str | None:
        """The cached answer (now the most recently used), or ``None``; counts a hit or a miss."""
        answer = self._answers.get(key)
        if answer is None:
            self.misses += 1
            return None
        self._answers.move_to_end(key)
        self.hits += 1
        return answer

    def put(self, key: CacheKey, answer: str) -> None:
        """Store an answer, evicting the least recently used beyond ``size``."""
        if self.size == 0:
            return
        self._answers[key] = answer
        self._answers.move_to_end(key)
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)


class LLMAnswerFeedback:
    """Reward = EM or F1 of a reader's answer from the picked chunks vs the gold answer.

    Episodes need a gold answer (``Episode.answer``), not supporting facts. Episodes always run to
    the step cap: whether an answer is right is known only once the reader was asked.
    """

    requires_support = False
    requires_answer = True
    never_terminate = True

    def __init__(
        self,
        reader: Reader,
        metric: str = "em",
        per_step: bool = False,
        template: str | None = None,
        chunk_order: str = "retrieval",
        cache_size: int = 100_000,
        batch_size: int | None = None,
    ) -> None:
        """
        Args:
            reader: answers a batch of prompts.
            metric: ``em``, ``f1`` or ``label`` (BabiLong's label match, for bAbI data).
            per_step: reward the gain in score at every pick instead of the score at the end.
            template: reader prompt with ``{context}`` and ``{question}`` (``None``: the default).
            chunk_order: picked chunks in the prompt in ``retrieval`` (pick) or ``document`` order.
            cache_size: answers kept in the LRU cache (0: no cache).
            batch_size: most prompts per reader call (``None``: all of a step in one call).
        """
        if metric not in ANSWER_METRICS:
            raise ValueError(f"metric must be one of {', '.join(ANSWER_METRICS)}; got {metric!r}")
        ordered([], chunk_order)  # validates the order
        self.reader = reader
        self.metric = metric
        self.per_step = per_step
        self.template = template or DEFAULT_TEMPLATE
        self.chunk_order = chunk_order
        self.cache = AnswerCache(cache_size)
        self.batch_size = batch_size
        self.reader_calls = 0
        """Calls of ``reader.generate``."""
        self.prompts_sent = 0
        """Prompts the reader answered."""

    @classmethod
    def from_spec(
        cls, reader: str, reader_options: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> LLMAnswerFeedback:
        """Build the reader from its spec (:func:`qrag_training.answering.load_reader`), then
        the feedback with ``kwargs``."""
        return cls(load_reader(reader, reader_options), **kwargs)

    # -- Feedback protocol ------------------------------------------------------------------------
    def reward(
        self, episode: Episode, picked: Sequence[int], step: int, final: bool = False
    ) -> float:
        """See :meth:`qrag_training.feedback.Feedback.reward` (one query of :meth:`rewards`)."""
        return self.rewards([RewardQuery(episode, tuple(picked), final)])[0]

    def terminal(self, episode: Episode, picked: Sequence[int]) -> bool:
        """Never: episodes run to the step cap."""
        return False

    def rewards(self, queries: Sequence[RewardQuery]) -> list[float]:
        """The rewards of many picks with at most one reader call per ``batch_size`` prompts."""
        needed: list[tuple[Episode, tuple[int, ...]]] = []
        for q in queries:
            if q.episode.answer is None:
                raise ValueError(
                    f"episode {q.episode.id!r} has no gold answer; feedback=llm needs one"
                )
            if self.per_step:
                needed += [(q.episode, q.picked), (q.episode, q.picked[:-1])]
            elif q.final:
                needed.append((q.episode, q.picked))
        scores = self._scores(needed)
        out = []
        for q in queries:
            if self.per_step:
                out.append(
                    scores[self._key(q.episode, q.picked)]
                    - scores[self._key(q.episode, q.picked[:-1])]
                )
            else:
                out.append(scores[self._key(q.episode, q.picked)] if q.final else 0.0)
        return out

    # -- answers ----------------------------------------------------------------------------------
    def _key(self, episode: Episode, picked: Sequence[int]) -> tuple[str, CacheKey]:
        """``(gold answer, cache key)``: the score depends on both, the answer on the key only."""
        ids = ordered(picked, self.chunk_order)
        return str(episode.answer), (episode.question, tuple(episode.chunks[i] for i in ids))

    def _scores(
        self, needed: Sequence[tuple[Episode, tuple[int, ...]]]
    ) -> dict[tuple[str, CacheKey], float]:
        """Score of every ``(episode, picks)``; empty picks score 0 without asking the reader."""
        scores: dict[tuple[str, CacheKey], float] = {}
        missing: dict[CacheKey, tuple[Episode, tuple[int, ...]]] = {}
        answers: dict[CacheKey, str] = {}
        for episode, picked in needed:
            gold, key = self._key(episode, picked)
            if not picked:
                scores[(gold, key)] = 0.0
            elif key not in answers and key not in missing:
                cached = self.cache.get(key)
                if cached is None:
                    missing[key] = (episode, picked)
                else:
                    answers[key] = cached
        if missing:
            prompts = [
                episode_prompt(e, ordered(p, self.chunk_order), self.template)
                for e, p in missing.values()
            ]
            got = generate_answers(self.reader, prompts, self.batch_size)
            self.reader_calls += -(-len(prompts) // (self.batch_size or len(prompts)))
            self.prompts_sent += len(prompts)
            for key, answer in zip(missing, got):
                self.cache.put(key, answer)
                answers[key] = answer
        for episode, picked in needed:
            gold, key = self._key(episode, picked)
            if picked:
                scores[(gold, key)] = answer_score(
                    answers[key], gold, self.metric, episode.question
                )
        return scores

    def stats(self) -> dict[str, float]:
        """Counters for the training log: reader calls, prompts, cache hits / misses / hit rate."""
        lookups = self.cache.hits + self.cache.misses
        return {
            "reader_calls": self.reader_calls,
            "reader_prompts": self.prompts_sent,
            "cache_hits": self.cache.hits,
            "cache_misses": self.cache.misses,
            "cache_hit_rate": self.cache.hits / lookups if lookups else 0.0,
        }
