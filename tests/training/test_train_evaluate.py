"""Evaluation: fact metrics, greedy multi-step retrieval, baselines, the qrag-eval CLI."""

from __future__ import annotations

import json

import pytest
from qrag_training.baselines import (
    bm25_retrieve,
    dense_retrieve,
    fuse,
    greedy_retrieve,
    hybrid_retrieve,
)
from qrag_training.data.episode import Episode
from qrag_training.evaluate import main
from qrag_training.metrics import Retrieval, fact_metrics, summarize


def test_fact_metrics():
    assert fact_metrics([1, 2, 3], [2, 3]) == (1.0, pytest.approx(0.8))
    assert fact_metrics([2], [2, 3]) == (0.0, pytest.approx(2 / 3))
    assert fact_metrics([], [1]) == (0.0, 0.0)
    assert fact_metrics([5, 6], [1]) == (0.0, 0.0)


def episodes():
    chunks = [
        "mary went to the kitchen.",
        "the cat is blue.",
        "john got the apple.",
        "the dog sat.",
    ]
    return [
        Episode(id=str(i), question="where is mary?", chunks=chunks, support=[0]) for i in range(3)
    ]


def test_greedy_retrieve_picks_distinct_chunks(tiny_bert_dir):
    from qrag_integrations import load_model

    model = load_model(str(tiny_bert_dir))
    results = greedy_retrieve(model, episodes(), steps=3, batch_size=2)
    assert len(results) == 3
    for r in results:
        assert len(r.picked) == 3 and len(set(r.picked)) == 3 and len(r.scores) == 3
    capped = greedy_retrieve(model, episodes(), steps=9)
    assert all(len(r.picked) == 4 for r in capped)  # no more picks than chunks
    stopped = greedy_retrieve(model, episodes(), steps=3, stop_threshold=1e9)
    assert all(r.picked == [] for r in stopped)  # the retriever's rule: nothing is above 1e9


@pytest.mark.parametrize("mode", [True, False])
def test_both_retrievers_search_in_eval_mode_and_restore_the_mode(tiny_bert_dir, mode):
    from qrag_integrations import load_model

    model = load_model(str(tiny_bert_dir))
    model.train(mode)
    seen = []
    embed = lambda texts: (seen.append(model.training), model.embed_chunks(texts))[1]
    greedy_retrieve(model, episodes(), steps=2, embed=embed)
    dense_retrieve(model, episodes(), k=2, embed=embed)
    assert seen and not any(seen)  # no dropout while searching
    assert model.training is mode


def test_greedy_retrieve_keeps_each_episode_index_on_the_model_device(tiny_bert_dir, monkeypatch):
    """On a GPU the evaluation searches there: its indexes live on the model's device (a CPU
    index would copy every episode's embeddings back and scan them on the CPU)."""
    from qrag_training import baselines

    from qrag_integrations import load_model

    devices = []

    class Recording(baselines.ChunkIndex):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            devices.append(self.device)

    monkeypatch.setattr(baselines, "ChunkIndex", Recording)
    model = load_model(str(tiny_bert_dir))
    greedy_retrieve(model, episodes(), steps=2)
    assert devices == [model.device] * 3


def test_bm25_and_summary():
    results = bm25_retrieve(episodes(), k=1)
    assert [r.picked for r in results] == [[0]] * 3
    summary = summarize(episodes(), results)
    assert summary["fact_em"] == 1.0 and summary["n"] == 3


def test_fuse_ranks_by_reciprocal_rank_as_langchains_ensemble():
    fused = fuse([Retrieval([5, 1, 2])], [Retrieval([1, 7, 5])], 2)[0]
    assert fused.picked == [1, 5]  # 1: ranks 2 and 1; 5: ranks 1 and 3
    assert fused.scores == pytest.approx([1 / 62 + 1 / 61, 1 / 61 + 1 / 63])
    assert fuse([Retrieval([4])], [Retrieval([])], 3)[0].picked == [4]
    with pytest.raises(ValueError):  # one ranking of each kind per question
        fuse([Retrieval([4])], [], 3)


def test_hybrid_retrieve_fuses_the_dense_and_bm25_rankings(tiny_bert_dir):
    from qrag_integrations import load_model

    model = load_model(str(tiny_bert_dir))
    hybrid = hybrid_retrieve(model, episodes(), k=2)
    dense = dense_retrieve(model, episodes(), k=50)
    lexical = bm25_retrieve(episodes(), k=50)
    assert [r.picked for r in hybrid] == [r.picked for r in fuse(dense, lexical, 2)]
    assert all(len(r.picked) == 2 for r in hybrid)


def test_cli_runs_the_hybrid_baseline(tmp_path, tiny_bert_dir):
    out = tmp_path / "eval"
    main(_eval_args(tiny_bert_dir, out, baseline="hybrid"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 3 and summary["retriever"].startswith("dense+bm25:")


def test_fact_em_at_facts_counts_only_the_first_picks():
    two_facts = [
        Episode(
            id=str(i), question="where is the apple?", chunks=["a", "b", "c", "d"], support=[0, 2]
        )
        for i in range(3)
    ]
    results = [Retrieval([2, 0, 1]), Retrieval([0, 1, 2]), Retrieval([1, 3, 0])]
    summary = summarize(two_facts, results)
    assert summary["fact_em"] == pytest.approx(2 / 3)
    assert summary["fact_em_at_facts"] == pytest.approx(
        1 / 3
    )  # only [2, 0] holds both facts in 2 picks


def _eval_args(tiny_bert_dir, out, *extra, baseline="dense"):
    """``qrag-eval`` arguments: a baseline on 3 small qa1 episodes, 2 picks, one thread."""
    small = f"--baseline {baseline} --set env.task=qa1 --set env.eval_target_tokens=200 --n 3"
    return [
        *small.split(),
        "--steps",
        "2",
        "--threads",
        "1",
        "--base-model",
        str(tiny_bert_dir),
        "--out",
        str(out),
        *extra,
    ]


def test_cli_writes_samples_and_summary(tmp_path, tiny_bert_dir, capsys):
    out = tmp_path / "eval"
    main(_eval_args(tiny_bert_dir, out, baseline="base"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 3 and summary["steps"] == 2 and 0.0 <= summary["fact_f1"] <= 1.0
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and len(rows[0]["picked"]) == 2 and len(rows[0]["q_values"]) == 2
    assert '"fact_em"' in capsys.readouterr().out


def test_cli_quantize_bf16_encodes_in_bf16_and_says_so(tmp_path, tiny_bert_dir, capsys):
    main(_eval_args(tiny_bert_dir, tmp_path / "fp32"))
    main(_eval_args(tiny_bert_dir, tmp_path / "bf16", "--quantize", "bf16"))
    fp32, bf16 = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("fp32", "bf16"))
    assert (fp32["backend"], fp32["quantize"]) == ("torch", None)
    assert (bf16["backend"], bf16["quantize"]) == ("torch", "bf16")
    assert bf16["n"] == fp32["n"] == 3


def test_cli_refuses_a_quantization_the_backend_does_not_offer(tmp_path, tiny_bert_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(_eval_args(tiny_bert_dir, tmp_path / "x", "--backend", "onnx", "--quantize", "bf16"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "quantize with backend='onnx' must be one of" in err


def test_cli_threads_reach_the_searches_and_are_checked(
    tmp_path, tiny_bert_dir, monkeypatch, capsys
):
    """``--threads N`` is the searches' ``threads`` too (the same setting as the retriever's)."""
    from qrag_training import baselines

    settings = []
    searcher = baselines.MultiStepSearcher

    def recording(model, index, settings_=None, policy=None):
        settings.append(settings_)
        return searcher(model, index, settings_, policy)

    monkeypatch.setattr(baselines, "MultiStepSearcher", recording)
    main(_eval_args(tiny_bert_dir, tmp_path / "eval", "--threads", "2", baseline="base"))
    assert settings and {s.threads for s in settings} == {2}
    with pytest.raises(SystemExit) as exit_info:
        main(_eval_args(tiny_bert_dir, tmp_path / "x", "--threads", "0", baseline="base"))
    assert exit_info.value.code == 2
    assert "--threads: must be an integer >= 1, got '0'" in capsys.readouterr().err
