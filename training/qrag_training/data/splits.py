"""Deterministic train / eval splits by a stable hash of the record id.

``hash_bucket(id)`` is ``int(sha1(id)) mod n``; with the default ``n = 5`` bucket 0 is the
held-out "eval" split (never used for training, nor for choosing checkpoints) and buckets 1-4
are the training side. A validation slice "val" is carved out of the training side:
``int(sha1(id)) mod 25 == 1`` (one id in 25, all of them in bucket 1); it is used to choose
checkpoints and hyperparameters and is not trained on, so "train" is buckets 1-4 without it.
The split of a record depends on its id only, so it is the same on every machine and in every
run, and does not move when records are added or removed.

A corpus too small for that (your own JSONL file: a few hundred questions, or few documents)
gets a split fitted to it (:func:`plan_splits`): the same groups, by the same hash order, but
as many of them in the report and validation slices as brings each near its share of the
questions, so neither is left empty.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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


#: The fewest questions the stable split's validation and report slices must each hold for a
#: corpus to keep it; a fitted split aims for at least this many validation questions as well.
MIN_SLICE = 20
#: Shares of the questions a fitted split aims for: the report slice as bucket 0 of the stable
#: split (1 in 5), validation 1 in 25 (at least ``MIN_SLICE``, at most the report's share).
REPORT_SHARE, VAL_SHARE = 1 / N_BUCKETS, 1 / VAL_BUCKETS
#: :attr:`SplitPlan.method` values.
HASH, FITTED = "hash", "fitted"
#: The fewest groups a fitted split needs: one each for training, validation and report.
MIN_GROUPS = 3


@dataclass(frozen=True)
class SplitPlan:
    """Which split each group key falls in: the stable hash split, or one fitted to a corpus."""

    method: str
    """``hash`` (:func:`split_of`) or ``fitted`` (:func:`plan_splits`)."""
    fitted: Mapping[str, str] = field(default_factory=dict)
    """A fitted plan's split of every key."""
    hash_sizes: Mapping[str, int] = field(default_factory=dict)
    """Questions per split under the stable hash split (what a fitted plan replaced)."""

    def split(self, key: str) -> str:
        """The split of a group key."""
        return self.fitted[key] if self.method == FITTED else split_of(key)


def _order(key: str) -> int:
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16)


def _take(sizes: Mapping[str, int], free: list[str], target: float, keep: int) -> list[str]:
    """Groups of ``free`` (in order) for one slice: each one that brings the slice nearer to
    ``target`` questions, else the smallest one, leaving at least ``keep`` groups free."""
    taken, total = [], 0
    for key in free:
        if len(free) - len(taken) <= keep:
            break
        if total + sizes[key] / 2 <= target:
            taken.append(key)
            total += sizes[key]
    if not taken and len(free) > keep:
        taken.append(min(free, key=lambda k: sizes[k]))  # first of the smallest (stable order)
    return taken


def plan_splits(keys: Sequence[str], with_val: bool = True) -> SplitPlan:
    """The train / val / eval split of a corpus, one group key per question (repeated for the
    questions of one group).

    The stable hash split (:func:`split_of`) is kept when its validation and report slices hold
    ``MIN_SLICE`` questions each. Otherwise the split is fitted: walking the groups in hash order,
    the report slice ("eval") takes each group that brings it nearer to ``REPORT_SHARE`` of the
    questions, then the validation slice, from the groups left, nearer to ``VAL_SHARE`` (at least
    ``MIN_SLICE``, at most ``REPORT_SHARE``); a slice that took none takes the smallest group, and
    one group always stays for training. The report slice does not depend on ``with_val`` (false:
    a run that uses no validation slice trains on those groups), so a run that validates and one
    that does not report on the same questions.

    Raises:
        ValueError: a fitted split is needed and there are fewer than ``MIN_GROUPS`` groups.
    """
    sizes = Counter(keys)
    hash_sizes = Counter(split_of(key) for key in keys)
    if min(hash_sizes[VAL], hash_sizes[EVAL]) >= MIN_SLICE and hash_sizes[TRAIN]:
        return SplitPlan(HASH, hash_sizes=dict(hash_sizes))
    if len(sizes) < MIN_GROUPS:
        raise ValueError(
            f"{len(sizes)} group(s): a train, a validation and a report slice need {MIN_GROUPS}"
        )
    n = len(keys)
    free = sorted(sizes, key=_order)
    fitted = dict.fromkeys(free, TRAIN)
    report = _take(sizes, free, REPORT_SHARE * n, keep=2)
    fitted.update(dict.fromkeys(report, EVAL))
    if with_val:
        free = [k for k in free if k not in report]
        val_target = min(max(float(MIN_SLICE), VAL_SHARE * n), REPORT_SHARE * n)
        fitted.update(dict.fromkeys(_take(sizes, free, val_target, keep=1), VAL))
    return SplitPlan(FITTED, fitted=fitted, hash_sizes=dict(hash_sizes))
