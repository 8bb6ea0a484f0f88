"""Deterministic train / eval splits by a stable hash of the record id.

``hash_bucket(id)`` is ``int(sha1(id)) mod n``; with the default ``n = 5`` bucket 0 is the
held-out "eval" split (never used for training, nor for choosing checkpoints) and buckets 1-4
are the training side. A validation slice "val" is carved out of the training side:
``int(sha1(id)) mod 25 == 1`` (one id in 25, all of them in bucket 1); it is used to choose
checkpoints and hyperparameters and is not trained on, so "train" is buckets 1-4 without it.
The split of a record depends on its id only, so it is the same on every machine and in every
run, and does not move when records are added or removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TypeVar

TRAIN, VAL, EVAL, ALL = "train", "val", "eval", "all"
SPLITS: tuple[str, ...] = (TRAIN, VAL, EVAL, ALL)
N_BUCKETS = 5
EVAL_BUCKET = 0
#: The validation slice: ``hash_bucket(id, VAL_BUCKETS) == VAL_BUCKET``. ``VAL_BUCKETS`` is a
#: multiple of ``N_BUCKETS`` and ``VAL_BUCKET % N_BUCKETS != EVAL_BUCKET``, so it lies on the
#: training side.
VAL_BUCKETS = 25
VAL_BUCKET = 1

T = TypeVar("T")


def hash_bucket(id: str, n: int = N_BUCKETS) -> int:
    """Stable bucket of an id.

    Args:
        id: The record id.
        n: Number of buckets.

    Returns:
        ``int(sha1(id.encode("utf-8")).hexdigest(), 16) % n``.
    """
    return int(hashlib.sha1(str(id).encode("utf-8")).hexdigest(), 16) % n


def split_of(id: str) -> str:
    """Return the split ("train", "val" or "eval") a record id belongs to."""
    if hash_bucket(id) == EVAL_BUCKET:
        return EVAL
    return VAL if hash_bucket(id, VAL_BUCKETS) == VAL_BUCKET else TRAIN


def check_split(split: str) -> None:
    """Raise ValueError unless ``split`` is "train", "val", "eval" or "all"."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")


def filter_split(
    records: Iterable[T], split: str, get_id: Callable[[T], str], limit: int | None = None
) -> list[T]:
    """Keep the records of one split, in order, up to ``limit``.

    Args:
        records: The records.
        split: "train", "val", "eval" or "all".
        get_id: Returns a record's id.
        limit: Keep at most this many (None: all).

    Returns:
        The kept records.
    """
    check_split(split)
    out = []
    for record in records:
        if limit is not None and len(out) >= limit:
            break
        if split == ALL or split_of(get_id(record)) == split:
            out.append(record)
    return out
