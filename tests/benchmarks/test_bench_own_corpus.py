"""The own-corpus benchmark's article ranges: within SQuAD 0-17, no overlap, reserved refused."""

from __future__ import annotations

import pytest

from benchmarks.own_corpus.run import SPLITS, parse_args


def test_default_ranges_are_the_recorded_split() -> None:
    args = parse_args([])
    assert {name: getattr(args, name) for name in SPLITS} == SPLITS


def test_ranges_are_inclusive_and_half_open_inside() -> None:
    args = parse_args(["--train", "6-17", "--val", "4-5", "--heldout", "0-3"])
    assert (args.train, args.val, args.heldout) == ((6, 18), (4, 6), (0, 4))


@pytest.mark.parametrize("bad", ["12-18", "18-20", "5-3", "a-b", "7"])
def test_bad_or_reserved_range_is_refused(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--heldout", bad])
    assert "--heldout" in capsys.readouterr().err


def test_overlapping_ranges_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--train", "0-9", "--val", "9-10", "--heldout", "12-17"])
    assert "share articles" in capsys.readouterr().err
