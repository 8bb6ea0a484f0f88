"""A tiny run of ingest/rss.py: one record per shard and variant, each from its own process."""

from __future__ import annotations

import json
from pathlib import Path


def test_tiny_rss_series(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from benchmarks.ingest import rss as bench_streaming_rss

    out = tmp_path / "series.json"
    argv = [
        "--chunks",
        "13",
        "--shard-rows",
        "5",
        "--batch-size",
        "4",
        "--variants",
        "off,on,gc",
        "--checkpoint",
        str(tiny_bert_dir),
        "--workdir",
        str(tmp_path / "work"),
        "--out",
        str(out),
    ]
    result = bench_streaming_rss.main(argv)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert [r["variant"] for r in result["runs"]] == ["off", "on", "gc"]
    for run in result["runs"]:
        assert (run["rows"], run["shards"]) == (13, 3)
        assert [(r["shard"], r["rows"]) for r in run["records"]] == [
            (0, 0),
            (1, 5),
            (2, 10),
            (3, 13),
        ]
        # a process that imported torch holds more than 50 MB; the peak is never below the current
        assert all(r["hwm_bytes"] >= r["rss_bytes"] > 50e6 for r in run["records"])
        assert run["summary"]["last_shard"] == 3 and run["summary"]["middle_shard"] == 2
