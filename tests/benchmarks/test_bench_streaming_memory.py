"""A tiny run of ingest/memory.py: every kind of run is made in its own process and
measured, the Qdrant run resumes the cache without re-embedding, and the JSON is what main returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_tiny_streaming_memory_run(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from benchmarks.ingest import memory as bench_streaming_memory

    out = tmp_path / "memory.json"
    argv = [
        "--sizes",
        "6,13",
        "--baseline-sizes",
        "13",
        "--shard-rows",
        "5",
        "--batch-size",
        "4",
        "--checkpoint",
        str(tiny_bert_dir),
        "--workdir",
        str(tmp_path / "work"),
        "--out",
        str(out),
    ]
    result = bench_streaming_memory.main(argv)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    small, large = result["sizes"]
    assert (small["chunks"], large["chunks"]) == (6, 13) and "in_memory" not in small
    assert (small["streaming"]["shards"], large["streaming"]["shards"]) == (2, 3)
    assert "qdrant_from_cache" in large and "qdrant_from_cache" not in small
    assert large["qdrant_from_cache"]["points"] == 13
    assert (
        large["in_memory"]["embeddings_bytes"] == 13 * 32 * 4 and result["arithmetic"]["dim"] == 32
    )
    runs = [
        small["streaming"],
        large["streaming"],
        large["in_memory"],
        large["qdrant_from_cache"],
        result["model_only"],
    ]
    # a process that imported torch holds more than 50 MB; the wall time covers the whole process
    assert all(r["peak_rss_bytes"] > 50e6 and r["wall_seconds"] > 0 for r in runs)
    assert large["streaming"]["cache_bytes"] > small["streaming"]["cache_bytes"] > 0
    corpus = (tmp_path / "work" / "corpus-13.txt").read_text(encoding="utf-8").splitlines()
    assert (
        corpus[:6] == (tmp_path / "work" / "corpus-6.txt").read_text(encoding="utf-8").splitlines()
    )


@pytest.mark.parametrize("bad", [["--sizes", "100", "--qdrant-sizes", "50"], ["--sizes", "30000"]])
def test_refused_qdrant_sizes(bad: list[str]) -> None:
    from benchmarks.ingest import memory as bench_streaming_memory

    with pytest.raises(SystemExit) as exit_info:
        bench_streaming_memory.main(bad)
    assert exit_info.value.code == 2
