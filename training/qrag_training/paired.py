"""Paired comparison of two retrievers on the same questions: mean difference and a bootstrap
95% interval (questions resampled with replacement, the same resample for both methods)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class PairedDifference:
    """``mean(a) - mean(b)`` over paired per-question scores, with its bootstrap interval."""

    diff: float
    """Mean of ``a - b``."""
    low: float
    """Lower end of the 95% interval."""
    high: float
    """Upper end of the 95% interval."""
    n: int
    """Questions compared."""

    @property
    def verdict(self) -> str:
        """``better`` / ``worse`` when the interval excludes 0, else ``tie``."""
        if self.low > 0:
            return "better"
        if self.high < 0:
            return "worse"
        return "tie"

    def to_dict(self) -> dict:
        """JSON-able fields plus the verdict."""
        return {**asdict(self), "verdict": self.verdict}


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], resamples: int = 2000, seed: int = 0
) -> PairedDifference:
    """Mean difference of paired scores ``a - b`` and its percentile-bootstrap 95% interval.

    Raises:
        ValueError: If the two lists differ in length or are empty.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(
            f"paired scores need two non-empty lists of one length, got {x.size} and {y.size}"
        )
    d = x - y
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return PairedDifference(float(d.mean()), float(low), float(high), int(d.size))
