"""A weighted mixture of data sets: one training pool (or held-out set) drawn from several loaders.

Used to train one general checkpoint on everything we have (HotpotQA paragraphs, BabiLong
stories, RULER needles) with one model configuration. Each part names a loader of
:mod:`qrag_training.data.registry` and that loader's keyword arguments, plus a ``weight``;
``n`` episodes are shared out by weight (largest remainders first), and the parts' episodes are
interleaved so that any prefix of the list holds every part in about its share.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from qrag_training.data.episode import Episode

#: Keys of a part that are the mixture's, not the part loader's.
PART_KEYS = ("name", "weight", "one_document")
#: ``Episode.meta`` key set by a part with ``one_document: true``: the episode's chunks are one
#: document whatever their titles (read by :func:`qrag_training.documents.episode_doc_ids`).
ONE_DOCUMENT_KEY = "one_document"
#: Loaders of fixed data sets (files): the mixture samples its share from what they load.
FIXED_SETS = ("hotpotqa", "musique", "twowiki", "custom")
#: Per-part seed offset, so two generated parts never share a seed.
_SEED_STRIDE = 7919


def shares(weights: Sequence[float], n: int) -> list[int]:
    """``n`` split in proportion to ``weights`` (largest remainders get the leftovers).

    Raises:
        ValueError: For a negative weight, or weights that sum to zero.
    """
    if any(w < 0 for w in weights):
        raise ValueError(f"mixture weights must be >= 0, got {list(weights)}")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("mixture weights sum to zero")
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: -(exact[i] - counts[i]))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def interleave(groups: Sequence[Sequence[Episode]]) -> list[Episode]:
    """The groups' items merged so that every prefix holds each group in about its share
    (each item is placed at its group-relative time ``(j + 0.5) / len(group)``)."""
    keyed = [
        ((j + 0.5) / len(g), i, item) for i, g in enumerate(groups) for j, item in enumerate(g)
    ]
    return [item for _, _, item in sorted(keyed, key=lambda t: (t[0], t[1]))]


def mixture_dataset(
    parts: Sequence[Mapping[str, Any]],
    n: int,
    seed: int = 0,
    *,
    loaders: Mapping[str, Callable[..., list[Episode]]],
) -> list[Episode]:
    """Episodes from several data sets, shared out by weight and interleaved.

    Args:
        parts: One mapping per data set: ``name`` (a loader name), ``weight`` (share of ``n``,
            default 1), ``one_document`` (default false: each episode's chunks are one document
            for position mode ``document``, e.g. a HotpotQA question's ten paragraphs, whose
            order says nothing about relevance) and that loader's keyword arguments. ``n`` / ``limit`` are set from the
            part's share; a generated part's ``seed`` (if it takes one) becomes
            ``seed + its own seed + part index * 7919`` so a refreshed pool (new ``seed``) gives
            every generated part new episodes.
        n: Episodes in all.
        seed: Mixture seed, added to every generated part's seed.
        loaders: Loader per name (the registry passes its own: ``load_dataset("mixture", ...)``).

    Returns:
        ``n`` episodes (fewer when a fixed data set holds fewer than its share); each episode's
        ``meta["mixture_part"]`` names its part as ``<index>:<name>``.

    Raises:
        ValueError: For no parts, an unknown loader name or a bad weight.
    """
    if not parts:
        raise ValueError("a mixture needs at least one part")
    weights = [float(p.get("weight", 1.0)) for p in parts]
    counts = shares(weights, int(n))
    groups: list[list[Episode]] = []
    for index, (part, count) in enumerate(zip(parts, counts)):
        name = str(part.get("name", "")).strip().lower()
        if name == "mixture" or name not in loaders:
            valid = ", ".join(k for k in loaders if k != "mixture")
            raise ValueError(
                f"mixture part {index}: unknown data set {part.get('name')!r}; valid: {valid}"
            )
        if count == 0:
            continue
        kwargs = {k: v for k, v in part.items() if k not in PART_KEYS}
        if name in FIXED_SETS:
            episodes = loaders[name](**kwargs)
            # a fixed data set: a seeded shuffle picks this pool's share
            order = list(range(len(episodes)))
            random.Random(seed * 1_000_003 + index).shuffle(order)
            picked = [episodes[i] for i in order[:count]]
        else:
            kwargs["n"] = count
            if "seed" in kwargs:
                kwargs["seed"] = int(kwargs["seed"]) + int(seed) + index * _SEED_STRIDE
            picked = loaders[name](**kwargs)
        tag = f"{index}:{name}"
        one_document = _flag(part.get("one_document", False), index)
        groups.append([_tagged(e, tag, one_document) for e in picked])
    return interleave(groups)


def _flag(value: Any, index: int) -> bool:
    """A part's boolean setting, refusing anything but a bool (YAML ``yes`` / ``true``)."""
    if not isinstance(value, bool):
        # a config error like the module's others (ValueError), whatever the value's type
        raise ValueError(  # noqa: TRY004
            f"mixture part {index}: one_document must be true or false, got {value!r}"
        )
    return value


def _tagged(episode: Episode, tag: str, one_document: bool = False) -> Episode:
    """``episode`` with ``meta["mixture_part"] = tag`` (and ``meta["one_document"]`` when
    set; episodes are frozen: a copy)."""
    meta = {**episode.meta, "mixture_part": tag}
    if one_document:
        meta[ONE_DOCUMENT_KEY] = True
    return replace(episode, meta=meta)
