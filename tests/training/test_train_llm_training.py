"""A few PQN updates with feedback=llm (a scripted reader that answers right iff the gold fact is
in its prompt), on bAbI and on a custom JSONL corpus that has answers but no supporting labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qrag_training.data.custom import load_custom_jsonl
from qrag_training.evaluate import compose_config
from qrag_training.settings import load_episodes, run_config_from
from qrag_training.trainer import Trainer
from scripted_readers import gold_fact_reader, install_factory, write_unlabeled

SMALL = [
    "model=tiny",
    "steps=3",
    "batch_size=8",
    "envs_parallel=4",
    "eval_interval=3",
    "eval_episodes=4",
    "log_interval=1",
    "torch_threads=1",
    "algo.warmup=1",
    "algo.learning_start=8",
    "model.trainable_layers=1",
]


def records(out_dir: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (out_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]


def test_babi_training_with_the_llm_reward(tmp_path, tiny_bert_dir, monkeypatch) -> None:
    overrides = [
        *SMALL,
        f"model.base_model={tiny_bert_dir}",
        f"out_dir={tmp_path / 'run'}",
        "feedback=llm",
        "env.task=qa1",
        "env.target_tokens=250",
        "env.pool_size=16",
        "env.refresh_pool=false",
        "env.max_steps=3",
        "checkpoint_metric=reward",
    ]
    cfg = compose_config("babilong", overrides)
    run = run_config_from(cfg)
    reader = gold_fact_reader(load_episodes(cfg, run, "train") + load_episodes(cfg, run, "eval"))
    install_factory(monkeypatch, reader)
    trainer = Trainer(cfg)
    last = trainer.train()
    rows = records(tmp_path / "run")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert max(r["reward"] for r in rows[1:]) > 0  # some episodes picked the fact: answered right
    assert 0 <= last["eval/reward"] <= 1 and "eval/fact_em" in last
    assert last["feedback/reader_calls"] == len(reader.batches) > 0
    # one call per lock-step on which episodes end (every 3rd: max_steps=3), one per evaluation
    lock_steps = last["env_steps"] // 4
    assert len(reader.batches) <= lock_steps // 3 + 2 and all(len(b) <= 4 for b in reader.batches)
    assert (
        last["feedback/cache_hits"] + last["feedback/cache_misses"]
        >= last["feedback/reader_prompts"]
    )


def custom_overrides(tmp_path: Path, tiny_bert_dir: Path, *extra: str) -> list[str]:
    return [
        *SMALL,
        f"model.base_model={tiny_bert_dir}",
        f"out_dir={tmp_path / 'run'}",
        f"env.path={tmp_path / 'corpus.jsonl'}",
        "env.splitter=sentences",
        *extra,
    ]


def test_custom_corpus_without_support_trains_with_the_llm_reward(
    tmp_path, tiny_bert_dir, monkeypatch
) -> None:
    facts = write_unlabeled(tmp_path / "corpus.jsonl")
    reader = gold_fact_reader(load_custom_jsonl(tmp_path / "corpus.jsonl"), facts)
    install_factory(monkeypatch, reader)
    cfg = compose_config(
        "custom",
        custom_overrides(tmp_path, tiny_bert_dir, "feedback=llm", "checkpoint_metric=reward"),
    )
    last = Trainer(cfg).train()
    rows = records(tmp_path / "run")
    assert max(r["reward"] for r in rows[1:]) > 0
    assert last["eval/n_fact"] == 0 and (tmp_path / "run" / "best").is_dir()


def test_custom_corpus_without_support_is_refused_by_the_wrong_settings(
    tmp_path, tiny_bert_dir, monkeypatch
) -> None:
    write_unlabeled(tmp_path / "corpus.jsonl")
    cfg = compose_config("custom", custom_overrides(tmp_path, tiny_bert_dir))
    with pytest.raises(
        ValueError,
        match=r"none of the \d+ questions of .* has supporting facts .* feedback=ground_truth "
        r"needs them.* feedback=llm",
    ):
        Trainer(cfg)
    install_factory(monkeypatch, gold_fact_reader([]))
    cfg = compose_config(
        "custom", custom_overrides(tmp_path, tiny_bert_dir, "feedback=llm", "overwrite=true")
    )
    with pytest.raises(
        ValueError,
        match="checkpoint_metric=fact_em needs supporting facts .* checkpoint_metric=reward",
    ):
        Trainer(cfg)
