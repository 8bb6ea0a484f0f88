"""RULER-style needle-in-a-haystack episodes (Hsieh et al., 2024), our own generator.

Needles read "One of the special magic numbers for {key} is: {value}." and are hidden as
single-sentence chunks at random positions in a haystack of consecutive noise sentences
(:class:`~qrag_training.data.noise.NoiseSource`; Paul Graham's essays are not used). The
length scale is BabiLong's: 25 tokens per sentence. Variants:

- ``niah_single``: one needle, one key, one value.
- ``niah_multikey``: ``n_keys`` needles with different keys; the question asks one key, whose
  needle is the only support.
- ``niah_multivalue``: one key with ``n_values`` needles (different values); all support.
- ``niah_multiquery``: ``n_queries`` keys, one needle each; the question asks all of them,
  every needle is support.
"""

from __future__ import annotations

import random
import uuid

from qrag_training.data.babilong import tokens_to_sentences
from qrag_training.data.episode import Episode
from qrag_training.data.noise import MIXED, NoisePool, NoiseSource

NIAH_SINGLE = "niah_single"
NIAH_MULTIKEY = "niah_multikey"
NIAH_MULTIVALUE = "niah_multivalue"
NIAH_MULTIQUERY = "niah_multiquery"
NIAH_VARIANTS: tuple[str, ...] = (NIAH_SINGLE, NIAH_MULTIKEY, NIAH_MULTIVALUE, NIAH_MULTIQUERY)

NUMBERS, WORDS, UUIDS = "numbers", "words", "uuids"
NEEDLE_KINDS: tuple[str, ...] = (NUMBERS, WORDS, UUIDS)
NEEDLE_TEMPLATE = "One of the special magic {kind} for {key} is: {value}."
QUESTION_ONE = "What is the special magic {kind_one} for {query} mentioned in the provided text?"
QUESTION_ALL = "What are all the special magic {kind} for {query} mentioned in the provided text?"
ANSWER_SEPARATOR = ", "
SOURCE_NAME = "ruler"
DEFAULT_N_KEYS = 4
DEFAULT_N_VALUES = 4
DEFAULT_N_QUERIES = 2
_NUMBER_RANGE = (1_000_000, 9_999_999)  # seven-digit numbers, as in RULER

_ADJECTIVES: tuple[str, ...] = (
    "amber",
    "ancient",
    "brave",
    "brisk",
    "calm",
    "clever",
    "crimson",
    "curious",
    "dusty",
    "eager",
    "faint",
    "fierce",
    "gentle",
    "gloomy",
    "golden",
    "hollow",
    "humble",
    "icy",
    "jolly",
    "lively",
    "lonely",
    "lucky",
    "mellow",
    "misty",
    "noisy",
    "odd",
    "pale",
    "proud",
    "quiet",
    "rapid",
    "rusty",
    "silent",
    "silver",
    "sleepy",
    "smooth",
    "sturdy",
    "swift",
    "tender",
    "vivid",
    "wary",
)
_NOUNS: tuple[str, ...] = (
    "anchor",
    "badger",
    "beacon",
    "canyon",
    "cedar",
    "comet",
    "crystal",
    "falcon",
    "feather",
    "glacier",
    "harbor",
    "heron",
    "island",
    "jasmine",
    "lantern",
    "meadow",
    "meteor",
    "nebula",
    "oasis",
    "orchid",
    "otter",
    "pebble",
    "pepper",
    "planet",
    "quartz",
    "raven",
    "ribbon",
    "saddle",
    "spruce",
    "thistle",
    "thunder",
    "tulip",
    "valley",
    "velvet",
    "walnut",
    "willow",
    "wizard",
    "yacht",
    "zephyr",
    "lagoon",
)


def _random_token(kind: str, rng: random.Random) -> str:
    if kind == NUMBERS:
        return str(rng.randint(*_NUMBER_RANGE))
    if kind == WORDS:
        return f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}"
    if kind == UUIDS:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    raise ValueError(f"unknown needle kind {kind!r}; valid kinds: {', '.join(NEEDLE_KINDS)}")


def _distinct_tokens(kind: str, n: int, rng: random.Random, used: set[str]) -> list[str]:
    out = []
    while len(out) < n:
        token = _random_token(kind, rng)
        if token not in used:
            used.add(token)
            out.append(token)
    return out


def _shape(variant: str, n_keys: int, n_values: int, n_queries: int) -> tuple[int, int, int]:
    """(keys, values per key, keys asked) for a variant."""
    if variant == NIAH_SINGLE:
        return 1, 1, 1
    if variant == NIAH_MULTIKEY:
        return n_keys, 1, 1
    if variant == NIAH_MULTIVALUE:
        return 1, n_values, 1
    if variant == NIAH_MULTIQUERY:
        return n_queries, 1, n_queries
    raise ValueError(f"unknown RULER variant {variant!r}; valid: {', '.join(NIAH_VARIANTS)}")


def _join_keys(keys: list[str]) -> str:
    if len(keys) <= 2:
        return " and ".join(keys)
    return ", ".join(keys[:-1]) + ", and " + keys[-1]


def make_niah_episode(
    variant: str,
    noise: NoiseSource | NoisePool,
    target_tokens: int,
    rng: random.Random,
    *,
    key_kind: str = WORDS,
    value_kind: str = NUMBERS,
    n_keys: int = DEFAULT_N_KEYS,
    n_values: int = DEFAULT_N_VALUES,
    n_queries: int = DEFAULT_N_QUERIES,
    episode_id: str = "",
) -> Episode:
    """Build one needle-in-a-haystack episode.

    Args:
        variant: One of :data:`NIAH_VARIANTS`.
        noise: Source of the haystack sentences: the whole corpus or a fixed pool.
        target_tokens: Context length in tokens (25 tokens per sentence).
        rng: Random generator (needles, positions, haystack passage).
        key_kind: "words", "numbers" or "uuids".
        value_kind: "numbers", "words" or "uuids".
        n_keys: Number of keys for ``niah_multikey``.
        n_values: Values per key for ``niah_multivalue``.
        n_queries: Keys asked for ``niah_multiquery``.
        episode_id: Id of the episode.

    Returns:
        The episode; ``answer`` is the asked values joined with ", ", ``meta`` holds the
        variant, the ``keys`` asked and the answer ``values``.
    """
    num_keys, num_values, num_asked = _shape(variant, n_keys, n_values, n_queries)
    used: set[str] = set()
    keys = _distinct_tokens(key_kind, num_keys, rng, used)
    values = {k: _distinct_tokens(value_kind, num_values, rng, used) for k in keys}
    needles = [(k, v) for k in keys for v in values[k]]
    rng.shuffle(needles)
    asked = rng.sample(keys, num_asked)

    n_chunks = max(len(needles), tokens_to_sentences(target_tokens))
    positions = sorted(rng.sample(range(n_chunks), len(needles)))
    filler = iter(noise.sample(n_chunks - len(needles), rng))
    at = {
        p: NEEDLE_TEMPLATE.format(kind=value_kind, key=k, value=v)
        for p, (k, v) in zip(positions, needles, strict=True)
    }
    chunks = [at[i] if i in at else next(filler) for i in range(n_chunks)]

    answers = [v for k in asked for v in values[k]]
    query = _join_keys(asked)
    if len(answers) == 1:
        question = QUESTION_ONE.format(kind_one=value_kind[:-1], query=query)
    else:
        question = QUESTION_ALL.format(kind=value_kind, query=query)
    support = [p for p, (k, _) in zip(positions, needles, strict=True) if k in asked]
    return Episode(
        id=episode_id,
        question=question,
        chunks=chunks,
        support=support,
        answer=ANSWER_SEPARATOR.join(answers),
        meta={
            "source": SOURCE_NAME,
            "variant": variant,
            "target_tokens": target_tokens,
            "keys": asked,
            "values": answers,
            "noise": noise.kind,
        },
    )


def ruler_dataset(
    variant: str,
    n: int,
    target_tokens: int,
    seed: int,
    noise_kind: str = MIXED,
    noise: NoiseSource | NoisePool | None = None,
    **kwargs: object,
) -> list[Episode]:
    """Generate needle-in-a-haystack episodes.

    Args:
        variant: One of :data:`NIAH_VARIANTS`.
        n: Number of episodes.
        target_tokens: Context length in tokens.
        seed: Random seed; the same arguments always give the same episodes.
        noise_kind: "shakespeare", "bible" or "mixed".
        noise: Where the noise comes from instead of ``NoiseSource(noise_kind, seed)`` (e.g. a
            fixed :class:`~qrag_training.data.noise.NoisePool`).
        **kwargs: Passed to :func:`make_niah_episode` (key_kind, value_kind, n_keys, ...).

    Returns:
        ``n`` episodes with ids ``ruler-<variant>-<target_tokens>-<seed>-<i>``.
    """
    _shape(variant, DEFAULT_N_KEYS, DEFAULT_N_VALUES, DEFAULT_N_QUERIES)  # validate early
    noise = noise if noise is not None else NoiseSource(noise_kind, seed)
    rng = random.Random(f"{SOURCE_NAME}-{variant}-{target_tokens}-{seed}")
    return [
        make_niah_episode(
            variant,
            noise,
            target_tokens,
            rng,
            episode_id=f"{SOURCE_NAME}-{variant}-{target_tokens}-{seed}-{i}",
            **kwargs,
        )  # type: ignore[arg-type]
        for i in range(n)
    ]
