"""A tiny run of reader/run.py (tiny BERT checkpoint, scripted reader) and BabiLong's label match."""

from __future__ import annotations

import json

import pytest
from qrag_training.answering import babilong_match
from scripted_readers import gold_fact_reader, install_factory


@pytest.mark.parametrize(
    ("answer", "gold", "question", "match"),
    [
        ("The apple is in the bathroom.", "bathroom", "Where is the apple?", 1.0),
        ("bathroom", "bathroom", "Where is the apple?", 1.0),
        ("The apple is in the garden. Not the bathroom.", "bathroom", "Where is the apple?", 0.0),
        (
            "Mary went from the kitchen to the bathroom",
            "bathroom",
            "Where is Mary?",
            0.0,
        ),  # two places
        (
            "Fred gave the apple to Bill.",
            "apple",
            "What did Fred give to Bill?",
            1.0,
        ),  # names asked
        ("nowhere", "kitchen", "Where is Mary?", 0.0),
    ],
)
def test_babilong_label_match(answer: str, gold: str, question: str, match: float) -> None:
    assert babilong_match(answer, gold, question) == match


def test_tiny_reader_benchmark_run(tiny_bert_dir, tmp_path, monkeypatch) -> None:
    from qrag_training.data.babilong import babilong_dataset
    from qrag_training.data.noise import MIXED, NoiseSource

    from benchmarks.babilong.cells import SPLIT_SEEDS
    from benchmarks.reader import run as bench_reader

    seed = SPLIT_SEEDS["test"]
    pool = NoiseSource(MIXED).pool(40, seed=seed)
    episodes = [
        e
        for t in ("qa1", "qa2")
        for n in (1000, 500)
        for e in babilong_dataset(t, 2, n, seed, noise=pool)
    ]
    reader = gold_fact_reader(episodes)
    install_factory(monkeypatch, reader)
    out = tmp_path / "reader.json"
    result = bench_reader.main(
        [
            "--suites",
            "babilong",
            "--tasks",
            "qa1,qa2",
            "--lengths",
            "500,1000",
            "--n",
            "3",
            "--limit",
            "2",
            "--checkpoint",
            f"babilong:tiny={tiny_bert_dir}",
            "--base",
            str(tiny_bert_dir),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--out",
            str(out),
        ]
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert (
        out.with_suffix(".png").stat().st_size > 0
        and "| tiny |" in out.with_suffix(".md").read_text()
    )
    assert result["reader"] == "gold-fact" and [c["tokens"] for c in result["cells"]] == [500, 1000]
    for cell in result["cells"]:
        assert cell["n"] == 2 and list(cell["methods"]) == ["tiny", "dense", "bm25", "none"]
        assert cell["order"] == "document" and set(cell["methods"]["bm25"]["by_task"]) == {
            "qa1",
            "qa2",
        }
        assert (
            cell["methods"]["none"]["answer_label"] == 0.0
            and cell["methods"]["none"]["mean_reader_chunks"] == 0
        )
        for row in cell["methods"].values():
            # the reader answers right exactly when the retriever found every supporting fact
            assert row["answer_label"] == row["answer_em"] == row["fact_em"]
    assert len(reader.batches) == 2 * 4  # one reader call per cell and method (16 prompts per call)
