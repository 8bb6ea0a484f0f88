"""A generated corpus in the custom JSONL format and the overrides of a seconds-long next-hop run
on it with the tiny BERT (``tiny_bert_dir``), shared by the tests that train on one."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ["kitchen", "garden", "office", "hallway", "bedroom", "bathroom", "football", "apple"]


def write_corpus(
    path: Path, documents: int, per_document: int, support: bool = True, **extra: object
) -> Path:
    """``per_document`` questions on each of ``documents`` documents of six chunks (``chunks``);
    ``extra`` keys go into every line."""
    lines = []
    for d in range(documents):
        chunks = [f"the {WORDS[(d + c) % 8]} is where mary was on day {d}." for c in range(6)]
        for q in range(per_document):
            line = {"id": f"d{d}q{q}", "question": f"who was in the {WORDS[q % 8]}?"}
            line |= {"chunks": chunks, **extra}
            if support:
                line["support"] = [q % 6]
            lines.append(line)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def tiny_custom_run(model_dir: Path, out_dir: Path, corpus: Path, steps: int) -> list[str]:
    """``qrag-train`` overrides: next-hop on ``corpus``, two questions a step, evaluated at the
    start and the end only (no periodic checkpoint before ``steps``), no end-of-run report."""
    return [
        "env=custom",
        "algo=next_hop",
        "model=tiny",
        f"model.base_model={model_dir}",
        "model.trainable_layers=1",
        f"out_dir={out_dir}",
        f"env.path={corpus}",
        "env.splitter=sentences",
        "env.max_steps=2",
        "env.position_mode=none",
        "algo.questions_per_step=2",
        "algo.warmup=1",
        f"steps={steps}",
        "eval_interval=100000",
        "eval_episodes=4",
        "log_interval=1",
        "torch_threads=1",
        "final_report=false",
    ]
