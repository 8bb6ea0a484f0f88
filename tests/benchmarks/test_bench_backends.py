"""benchmarks/backends on a tiny setting: the torch rows, ratios and both quality sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.backends import run as bench


@pytest.mark.slow
def test_tiny_run_writes_the_rows(tmp_path: Path) -> None:
    out = tmp_path / "backends.json"
    result = bench.main(
        [
            "--chunks", "16",
            "--size", "500",
            "--queries", "2",
            "--hotpotqa", "4",
            "--babilong", "1",
            "--backends", "torch fp32,torch bf16",
            "--out", str(out),
        ]
    )  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    rows = result["backends"]
    assert list(rows) == ["torch fp32", "torch bf16"]
    assert rows["torch fp32"]["same_picks_as_torch"] == 1.0
    assert rows["torch fp32"]["babilong_same_picks_as_torch"] == 1.0
    assert result["babilong_val_stories"] == 5
    for row in rows.values():
        assert row["build_chunks_per_second"] > 0 and row["search_seconds_per_question"] > 0
        assert 0.0 <= row["babilong_val_em@6"] <= 1.0


def test_quality_only_runs_no_timing(tmp_path: Path, tiny_bert_dir: Path) -> None:
    result = bench.main(
        [
            "--quality-only",
            "--checkpoint", str(tiny_bert_dir),
            "--hotpotqa", "3",
            "--babilong", "1",
            "--backends", "torch fp32,torch bf16",
            "--out", str(tmp_path / "quality.json"),
        ]
    )  # fmt: skip
    assert result["checkpoint"] == str(tiny_bert_dir) and result["size"] is None
    for row in result["backends"].values():
        assert "build_chunks_per_second" not in row and "search_seconds_per_question" not in row
        assert 0.0 <= row["hotpotqa_val_em@4"] <= 1.0 and 0.0 <= row["babilong_val_em@6"] <= 1.0
    assert result["backends"]["torch fp32"]["same_picks_as_torch"] == 1.0


def test_unknown_rows_are_refused() -> None:
    with pytest.raises(SystemExit, match="unknown"):
        bench.main(["--backends", "openvino"])
