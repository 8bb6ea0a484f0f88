"""Generated lines train as they are: ``qrag-train preset=custom_cpu`` runs on a file written by
qrag_training.questions (tiny BERT, two updates)."""

from __future__ import annotations

import json
from pathlib import Path

from qrag_training.evaluate import compose_config
from qrag_training.questions import QuestionSettings, make_questions, write_lines
from qrag_training.settings import load_episodes, run_config_from
from qrag_training.trainer import Trainer
from question_corpus import documents


def test_a_training_step_runs_on_generated_lines(tmp_path: Path, tiny_bert_dir: Path) -> None:
    settings = QuestionSettings(chunk_size=160, pool_chunks=8, splitter="sentences")
    lines, _ = make_questions(documents(40), settings)
    path = tmp_path / "lines.jsonl"
    write_lines(path, lines)
    cfg = compose_config(
        "custom",
        [
            "preset=custom_cpu",
            "model=tiny",
            f"model.base_model={tiny_bert_dir}",
            f"out_dir={tmp_path / 'run'}",
            f"env.path={path}",
            "env.chunk_size=160",
            "env.splitter=sentences",
            "env.eval_hash_split=eval",  # 40 documents leave the validation slice empty
            "final_report=false",
            "steps=2",
            "eval_interval=2",
            "eval_episodes=8",
            "torch_threads=1",
            "algo.warmup=1",
            "algo.questions_per_step=4",
            "model.trainable_layers=1",
        ],
    )
    run = run_config_from(cfg)
    train, held_out = load_episodes(cfg, run, "train"), load_episodes(cfg, run, "eval")
    assert train and held_out

    def documents_of(episodes: list) -> set[str]:
        return {d for e in episodes for d in e.meta["chunk_doc_ids"]}

    assert not documents_of(train) & documents_of(held_out)  # held out by document
    Trainer(cfg).train()
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in records) == 2
    assert (tmp_path / "run" / "best").is_dir()
