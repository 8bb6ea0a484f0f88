"""A tiny run of store/hotpotqa.py: candidates covering the pooled paragraphs give the exact picks."""

from __future__ import annotations

import json
from pathlib import Path


def test_tiny_store_hotpotqa_run(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from benchmarks.store import hotpotqa as bench_store_hotpotqa

    out = tmp_path / "store_hotpotqa.json"
    argv = [
        "--checkpoint",
        str(tiny_bert_dir),
        "--limit",
        "3",
        "--candidates",
        "1,64",
        "--steps",
        "4",
        "--questions",
        "2",
        "--check-exact",
        "--check-limit",
        "1",
        "--qdrant-path",
        str(tmp_path / "q"),
        "--out",
        str(out),
    ]
    result = bench_store_hotpotqa.main(argv)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["split"] == "val" and result["questions"] == 2 and result["pool_questions"] == 3
    assert result["paragraphs"] <= 64 and result["check_limit"] == 1
    covering, narrow, exact = result["store"]["64"], result["store"]["1"], result["exact"]
    assert covering["same_picks"] == covering["recall_exact"] == covering["exact_rate"] == 1.0
    assert (covering["em@2"], covering["em@4"]) == (exact["em@2"], exact["em@4"])
    assert 0.0 <= narrow["exact_rate"] <= 1.0 and 0.0 <= narrow["recall_exact"] <= 1.0
    assert (
        all(r["seconds_mean"] > 0 for r in (covering, narrow, exact))
        and result["layout_seconds"] >= 0
    )
