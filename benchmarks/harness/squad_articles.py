"""``--...-articles A-B`` of the benchmarks that read SQuAD v2 dev articles (within 0-17)."""

from __future__ import annotations

import argparse

from qrag_training.data.squad import VALIDATION_ARTICLES


def article_range(text: str) -> tuple[int, int]:
    """``"A-B"`` (inclusive, within the articles the SQuAD loader may read) as the half-open range
    ``(A, B + 1)``; the loader refuses the reserved ones too, this says so in argparse's words."""
    try:
        a, b = (int(x) for x in text.split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range like 0-9") from None
    last = VALIDATION_ARTICLES - 1
    if not 0 <= a <= b <= last:
        raise argparse.ArgumentTypeError(
            f"{text!r}: articles must lie within 0-{last} ({VALIDATION_ARTICLES}-34 are reserved) "
            "with A <= B"
        )
    return a, b + 1
