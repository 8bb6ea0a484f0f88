"""A tiny run of store/run.py: candidates covering the haystack give the exact search's picks."""

from __future__ import annotations

import json
from pathlib import Path


def test_tiny_store_benchmark_run(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from benchmarks.store import run as bench_store

    out = tmp_path / "store.json"
    argv = [
        "--checkpoint",
        str(tiny_bert_dir),
        "--tasks",
        "qa2",
        "--tokens",
        "1000",
        "--n",
        "2",
        "--candidates",
        "1,64",
        "--steps",
        "3",
        "--check-exact",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--qdrant-path",
        str(tmp_path / "q"),
        "--out",
        str(out),
    ]
    result = bench_store.main(argv)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    [cell] = result["cells"]
    assert cell["task"] == "qa2" and cell["n"] == 2 and cell["chunks"] <= 64
    covering, narrow = cell["store"]["64"], cell["store"]["1"]
    assert covering["same_picks"] == covering["recall_exact"] == covering["exact_rate"] == 1.0
    assert covering["em@facts"] == cell["exact"]["em@facts"]
    assert 0.0 <= narrow["exact_rate"] <= 1.0 and 0.0 <= narrow["recall_exact"] <= 1.0
    assert (
        all(r["seconds_mean"] > 0 for r in (covering, narrow, cell["exact"]))
        and cell["layout_seconds_mean"] > 0
    )
