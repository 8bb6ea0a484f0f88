"""benchmarks/compact_scan on a tiny setting: every size x backend x scan row, ratios, quality."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.compact_scan import run as bench


@pytest.mark.slow
def test_tiny_run_writes_every_row(tmp_path: Path) -> None:
    out = tmp_path / "compact.json"
    result = bench.main(
        [
            "--sizes", "300,600",
            "--queries", "2",
            "--hotpotqa", "4",
            "--noise", "40",
            "--backends", "torch",
            "--rescore", "5",
            "--cache", str(tmp_path / "cache"),
            "--out", str(out),
        ]
    )  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    rows = result["rows"]
    assert [(r["size"], r["scan"]) for r in rows] == [
        (s, k) for s in (300, 600) for k in ("exact", "int8", "binary")
    ]
    exact = [r for r in rows if r["scan"] == "exact"]
    assert all(r["same_picks_as_exact"] == 1.0 for r in exact)
    assert all(r["search_seconds_per_question"] > 0 for r in rows)
    assert {r["bytes_per_chunk"] for r in rows} == {1536, 1536 + 384, 1536 + 48}
    assert result["quality"]["hotpotqa_val_questions"] == 4
