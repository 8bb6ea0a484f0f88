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


@pytest.mark.slow
def test_retriever_batch_run_times_each_call_and_checks_results(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``benchmarks/batch_search/retriever.py`` on a tiny corpus (the tiny BERT): a row per
    thread count and path, every call returning the sequential results."""
    from langchain_core.documents import Document

    from benchmarks.batch_search import retriever as bench_retriever

    texts = ["Mary went to the kitchen.", "John took the apple.", "Mary moved to the garden."]
    docs = [
        Document(id=f"a{i // 2}p{i % 2}", page_content=t, metadata={"source": f"art{i // 2}"})
        for i, t in enumerate(texts)
    ]
    sample = [("Where is Mary?", "a0p0"), ("Who took the apple?", "a0p1")]
    monkeypatch.setattr(bench_retriever, "corpus", lambda seed, n: (docs, sample[:n]))
    monkeypatch.setattr(bench_retriever, "CACHE", tmp_path / "cache")
    out = tmp_path / "retriever.json"
    result = bench_retriever.main(
        ["--questions", "2", "--k", "2", "--threads", "1,2", "--reps", "2", "--store",
         "--checkpoint", str(tiny_bert_dir), "--out", str(out)]
    )  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert [(r["threads"], r["path"]) for r in result["rows"]] == [
        (1, "memory"), (1, "qdrant_store"), (2, "memory"), (2, "qdrant_store")
    ]  # fmt: skip
    for row in result["rows"]:
        assert row["same_results_batch"] == row["same_results_chain_batch"] == 1.0
        assert len(row["rounds"]) == 2 and row["seconds_batch"] > 0 and row["ratio_batch"] > 0
        assert 0 < row["encoder_share_sequential_invoke"] <= 1
    assert result["paragraphs"] == 3 and result["k"] == 2
