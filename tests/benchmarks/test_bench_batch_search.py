"""benchmarks/batch_search on a tiny index: a row per batch size, both scans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.batch_search import run as bench


@pytest.mark.slow
@pytest.mark.parametrize("scan", ["exact", "bf16"])
def test_tiny_run_writes_a_row_per_batch(tmp_path: Path, scan: str) -> None:
    out = tmp_path / "batch.json"
    result = bench.main(
        ["--size", "300", "--batches", "1,4", "--reps", "1", "--scan", scan, "--rescore", "20",
         "--out", str(out)]
    )  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert [r["batch"] for r in result["rows"]] == [1, 4]
    assert result["scan"] == scan and result["rescore"] == (None if scan == "exact" else 20)
    assert all(r["same_picks"] == 1.0 and r["seconds_batched"] > 0 for r in result["rows"])
