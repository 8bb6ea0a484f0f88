"""Load any supported data set by name.

``load_dataset(name, **kwargs)`` forwards ``kwargs`` to the loader of ``name``:

- "babilong": :func:`~qrag_training.data.babilong.babilong_dataset`
  (task, n, target_tokens, seed, noise_kind="mixed", story_len=None)
- "ruler": :func:`~qrag_training.data.ruler.ruler_dataset`
  (variant, n, target_tokens, seed, noise_kind="mixed", ...)
- "hotpotqa": :func:`~qrag_training.data.hotpotqa.load_hotpotqa` (split, limit, path)
- "musique": :func:`~qrag_training.data.musique.load_musique` (path, split, limit, ...)
- "twowiki": :func:`~qrag_training.data.twowiki.load_twowiki` (path, split, limit)
- "custom": :func:`~qrag_training.data.custom.load_custom_jsonl` (path, chunk_size, ...)
- "mixture": :func:`~qrag_training.data.mixture.mixture_dataset` (parts, n, seed): several of
  the above, shared out by weight and interleaved
"""

from __future__ import annotations

from collections.abc import Callable

from qrag_training.data.babilong import babilong_dataset
from qrag_training.data.custom import load_custom_jsonl
from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.data.mixture import mixture_dataset
from qrag_training.data.musique import load_musique
from qrag_training.data.ruler import ruler_dataset
from qrag_training.data.twowiki import load_twowiki


def _mixture(parts: list[dict[str, object]], n: int, seed: int = 0) -> list[Episode]:
    """:func:`~qrag_training.data.mixture.mixture_dataset` over this registry's loaders."""
    return mixture_dataset(parts, n, seed, loaders=LOADERS)


LOADERS: dict[str, Callable[..., list[Episode]]] = {
    "babilong": babilong_dataset,
    "ruler": ruler_dataset,
    "hotpotqa": load_hotpotqa,
    "musique": load_musique,
    "twowiki": load_twowiki,
    "custom": load_custom_jsonl,
    "mixture": _mixture,
}
DATASET_NAMES: tuple[str, ...] = tuple(LOADERS)


def load_dataset(name: str, **kwargs: object) -> list[Episode]:
    """Load a data set by name.

    Args:
        name: One of :data:`DATASET_NAMES` (case and surrounding spaces are ignored).
        **kwargs: Arguments of that data set's loader.

    Returns:
        The episodes.

    Raises:
        ValueError: For an unknown name (the message lists the valid ones).
    """
    key = name.strip().lower()
    if key not in LOADERS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASET_NAMES)}")
    return LOADERS[key](**kwargs)
