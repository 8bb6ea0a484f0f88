"""BabiLong-style episodes: a bAbI story hidden, in order, inside long noise text.

Length follows the paper's scale of 40 sentences per 1K tokens (40,000 sentences per 1M
tokens), i.e. :data:`TOKENS_PER_SENTENCE` = 25 tokens per sentence, so an episode of
``target_tokens`` has ``max(len(story), round(target_tokens / 25))`` chunks of one sentence
each. The story sentences (supporting facts and the other, distracting, facts) keep their
order and go to uniformly random positions; the rest are consecutive noise sentences.

The stories are bAbI's qa1-qa5 (:mod:`qrag_training.data.babi`) or ``qa2-moves``
(:mod:`qrag_training.data.babi_moves`: the object's holder moves before and after taking it).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import zip_longest

from qrag_training.data.babi import BabiSample, generate_babi
from qrag_training.data.babi_moves import MOVES_TASK, generate_moves
from qrag_training.data.babi_world import TASKS
from qrag_training.data.episode import Episode
from qrag_training.data.noise import MIXED, NoisePool, NoiseSource

TOKENS_PER_SENTENCE = 25
SOURCE_NAME = "babilong"
#: Every story task a BabiLong episode can hold.
STORY_TASKS: tuple[str, ...] = (*TASKS, MOVES_TASK)


def generate_stories(
    task: str, n: int, seed: int, story_len: tuple[int, int] | None = None
) -> list[BabiSample]:
    """``n`` stories of one of :data:`STORY_TASKS` (``generate_babi`` or ``generate_moves``).

    Raises:
        ValueError: For an unknown task or a bad story length.
    """
    if task == MOVES_TASK:
        return generate_moves(n, seed, story_len)
    if task not in TASKS:
        raise ValueError(f"unknown story task {task!r}; valid tasks: {', '.join(STORY_TASKS)}")
    return generate_babi(task, n, seed, story_len)


def tokens_to_sentences(tokens: int) -> int:
    """Count the sentences in a haystack of ``tokens`` tokens at the paper's scale.

    Args:
        tokens: Target length in tokens.

    Returns:
        ``round(tokens / 25)``, at least 1 (1K tokens -> 40, 1M tokens -> 40,000).
    """
    return max(1, round(tokens / TOKENS_PER_SENTENCE))


def make_babilong_episode(
    sample: BabiSample,
    noise: NoiseSource | NoisePool,
    target_tokens: int,
    rng: random.Random,
    episode_id: str = "",
) -> Episode:
    """Hide a bAbI story inside noise sentences.

    Args:
        sample: The bAbI sample.
        noise: Where the noise sentences come from: the whole corpus or a fixed pool.
        target_tokens: Target context length in tokens (25 tokens per sentence).
        rng: Random generator for the fact positions and the noise passage.
        episode_id: Id of the episode.

    Returns:
        An episode whose chunks are single sentences and whose support holds the new
        positions of the sample's supporting facts. ``meta`` records the task, the target
        length and ``story_positions`` (the position of every story sentence).
    """
    n_story = len(sample.story)
    n_chunks = max(n_story, tokens_to_sentences(target_tokens))
    positions = sorted(rng.sample(range(n_chunks), n_story))
    filler = iter(noise.sample(n_chunks - n_story, rng))
    at = dict(zip(positions, sample.story, strict=True))
    chunks = [at[i] if i in at else next(filler) for i in range(n_chunks)]
    return Episode(
        id=episode_id,
        question=sample.question,
        chunks=chunks,
        support=[positions[i] for i in sample.supporting],
        answer=sample.answer,
        meta={
            "source": SOURCE_NAME,
            "task": sample.task,
            "target_tokens": target_tokens,
            "story_positions": positions,
            "noise": noise.kind,
        },
    )


def task_list(task: str | Sequence[str]) -> list[str]:
    """The bAbI tasks named by ``task``: one name, a comma-separated string or a sequence.

    Raises:
        ValueError: If no task is named.
    """
    names = task.split(",") if isinstance(task, str) else [str(t) for t in task]
    tasks = [t.strip() for t in names if t.strip()]
    if not tasks:
        raise ValueError(f"no bAbI task named in {task!r}")
    return tasks


def babilong_dataset(
    task: str | Sequence[str],
    n: int,
    target_tokens: int | Sequence[int],
    seed: int,
    noise_kind: str = MIXED,
    story_len: tuple[int, int] | None = None,
    noise: NoiseSource | NoisePool | None = None,
) -> list[Episode]:
    """Generate BabiLong-style episodes.

    Args:
        task: Story task, "qa1".."qa5" or "qa2-moves"; several tasks ("qa1,qa2,qa3" or a list) mix them:
            ``n`` is shared out evenly (the first tasks get one more when it does not divide)
            and the episodes are interleaved task by task; a task named twice gets twice the
            share (distinct samples, not copies).
        n: Number of episodes.
        target_tokens: Context length in tokens (e.g. 4000 -> 160 sentences); a list of
            lengths is a curriculum-free mix: episode ``i`` of each task takes length
            ``i mod len(list)``.
        seed: Random seed; the same arguments always give the same episodes.
        noise_kind: "shakespeare", "bible" or "mixed".
        story_len: (min, max) story sentences, default per task (see ``generate_stories``).
        noise: Where the noise comes from instead of ``NoiseSource(noise_kind, seed)``, e.g. a
            fixed :class:`~qrag_training.data.noise.NoisePool` embedded once (the same stories;
            their positions differ, since the pool draws from the same generator).

    Returns:
        ``n`` episodes with ids ``babilong-<task>-<target_tokens>-<seed>-<i>``.
    """
    tasks = task_list(task)
    lengths = (
        [int(target_tokens)] if isinstance(target_tokens, int) else [int(t) for t in target_tokens]
    )
    if not lengths:
        raise ValueError("target_tokens names no length")
    noise = noise if noise is not None else NoiseSource(noise_kind, seed)
    # one generator per (task, length), used in episode order: a single-task, single-length
    # call gives exactly the episodes it gave before mixing existed
    rngs: dict[tuple[str, int], random.Random] = {}
    counts = [
        n // len(tasks) + (1 if t_index < n % len(tasks) else 0) for t_index in range(len(tasks))
    ]
    # a task named twice weighs twice: its samples come from one stream, shared out in order
    streams = {
        name: iter(
            enumerate(
                generate_stories(
                    name, sum(c for t, c in zip(tasks, counts) if t == name), seed, story_len
                )
            )
        )
        for name in dict.fromkeys(tasks)
    }
    per_task: list[list[Episode]] = []
    for name, count in zip(tasks, counts):
        episodes = []
        for _ in range(count):
            i, sample = next(streams[name])
            tokens = lengths[i % len(lengths)]
            rng = rngs.setdefault(
                (name, tokens), random.Random(f"{SOURCE_NAME}-{name}-{tokens}-{seed}")
            )
            episodes.append(
                make_babilong_episode(
                    sample,
                    noise,
                    tokens,
                    rng,
                    episode_id=f"{SOURCE_NAME}-{name}-{tokens}-{seed}-{i}",
                )
            )
        per_task.append(episodes)
    return [e for group in zip_longest(*per_task) for e in group if e is not None]
