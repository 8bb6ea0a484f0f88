"""Paired bootstrap comparison of two methods on the same questions."""

from __future__ import annotations

import pytest
from qrag_training.paired import paired_bootstrap


def test_identical_methods_tie_with_a_zero_interval() -> None:
    d = paired_bootstrap([1, 0, 1, 1], [1, 0, 1, 1])
    assert (d.diff, d.low, d.high, d.n, d.verdict) == (0.0, 0.0, 0.0, 4, "tie")


def test_a_clear_gain_is_better_and_a_clear_loss_worse() -> None:
    a, b = [1.0] * 80 + [0.0] * 20, [0.0] * 60 + [1.0] * 40
    better = paired_bootstrap(a, b)
    assert better.diff == pytest.approx(0.4) and better.low > 0 and better.verdict == "better"
    assert paired_bootstrap(b, a).verdict == "worse"


def test_a_small_difference_on_few_questions_is_a_tie() -> None:
    d = paired_bootstrap([1, 1, 0, 1, 0, 1], [1, 0, 0, 1, 0, 1])
    assert (
        d.diff == pytest.approx(1 / 6) and d.low <= 0 <= d.high and d.to_dict()["verdict"] == "tie"
    )


def test_unpaired_input_is_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        paired_bootstrap([1, 0], [1])
    with pytest.raises(ValueError, match="non-empty"):
        paired_bootstrap([], [])
