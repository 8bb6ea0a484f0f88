"""30 random faults (single-bit flips, truncations, deletions) over every file of two saved
retrievers (full and partial checkpoint in the folder): each is refused naming the damaged file,
or loads with the undamaged picks; none changes picks silently (the full run of 1,000:
``python -m benchmarks.fault_injection.run``)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.fault_injection.run import make_saves, run_trials


def test_no_fault_changes_picks_silently(tmp_path: Path) -> None:
    result = run_trials(make_saves(tmp_path), trials=30, seed=1)
    counts = result["counts"]
    assert sum(counts.values()) == 30
    assert result["not_refused_by_name_nor_same"] == [], result["not_refused_by_name_nor_same"]
    assert counts.get("refused", 0) > 0
