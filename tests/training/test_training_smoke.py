"""End-to-end: `python -m qrag_training.train` on a tiny BERT, resume, load the checkpoint; and
runs killed with SIGKILL in the middle of their checkpoint writes, resumed to the end."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_run import TINY_RUN

#: Every test here runs ``qrag-train`` in a subprocess (tens of seconds each).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def train(
    out_dir: Path, model_dir: Path, steps: int, *extra: str, kill: tuple[str, int] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run qrag-train, which must succeed; with ``kill=(name, n)``, through
    ``tests/kill_during_checkpoint.py`` (SIGKILL at the n-th write of its saves of
    ``out_dir/name``; ``n = 0`` counts the writes), whose exit status the caller checks."""
    env = dict(
        os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false"
    )
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "training"), str(REPO), env.get("PYTHONPATH", "")]
    )
    entry = ["-m", "qrag_training.train"]
    if kill is not None:
        entry = [str(REPO / "tests" / "kill_during_checkpoint.py"), kill[0], str(kill[1])]
    cmd = [
        sys.executable,
        *entry,
        *TINY_RUN,
        f"model.base_model={model_dir}",
        f"out_dir={out_dir}",
        f"steps={steps}",
        *extra,
    ]
    if "algo=next_hop" not in extra:
        cmd += ["algo.learning_start=8", "algo.accumulate_grads=1"]
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, env=env, timeout=300, cwd=REPO
    )
    assert proc.returncode == 0 or kill, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def records(out_dir: Path) -> list[dict]:
    """The run's metric history (rows a resumed run logged again replace the killed run's)."""
    from qrag_training.run_folder import read_metrics

    return read_metrics(out_dir / "metrics.jsonl")


def test_train_resume_and_load(tmp_path: Path, tiny_bert_dir: Path) -> None:
    out = tmp_path / "run"
    train(out, tiny_bert_dir, steps=2)
    last = out / "last"
    assert (last / "qrag_config.json").is_file() and (last / "train_state" / "state.json").is_file()
    assert (out / "best" / "train_config.yaml").is_file()
    state = json.loads((last / "train_state" / "state.json").read_text())
    assert state["agent"]["updates"] == 2
    first = records(out)
    assert [r["step"] for r in first] == [0, 1, 2]
    assert "eval/fact_em" in first[0] and "loss" in first[-1]
    assert any((out / "tb").iterdir())
    from qrag_training.plot import plot_metrics

    assert plot_metrics(out / "metrics.jsonl").stat().st_size > 0

    # resume: the step counter continues from the saved state, no re-evaluation at step 0
    train(out, tiny_bert_dir, 4, "resume=true")
    state = json.loads((last / "train_state" / "state.json").read_text())
    assert state["agent"]["updates"] == 4
    assert state["agent"]["env_steps"] > 16
    steps = [r["step"] for r in records(out)]
    assert steps == [0, 1, 2, 3, 4]

    from qrag_integrations import load_model

    model = load_model(str(last))
    assert model.config.trainable_layers == 1
    assert model.config.extra["train_config"]["steps"] == 4
    assert model.config.extra["step"] == 4
    emb = model.embed_chunks(["mary went to the kitchen."])
    assert emb.shape == (1, model.embedding_dim)

    from qrag_integrations import QRAGRetriever

    retriever = QRAGRetriever.from_texts(
        ["mary went to the kitchen.", "the cat is blue.", "john got the apple."],
        checkpoint=str(last),
        k=2,
    )
    docs = retriever.invoke("where is mary?")
    assert len(docs) == 2


def test_next_hop_warm_start_then_pqn_from_it(tmp_path: Path, tiny_bert_dir: Path) -> None:
    """algo=next_hop trains and checkpoints like PQN; PQN then starts from it with init_from."""
    warm = tmp_path / "warm"
    train(
        warm,
        tiny_bert_dir,
        2,
        "algo=next_hop",
        "algo.questions_per_step=2",
        "env.position_mode=none",
    )
    rec = records(warm)
    assert [r["step"] for r in rec] == [0, 1, 2]
    assert "hop_accuracy" in rec[-1] and "eval/fact_em" in rec[-1]
    pqn = tmp_path / "pqn"
    # token budgets and question anchoring are search settings: the new run sets its own
    train(
        pqn,
        tiny_bert_dir,
        2,
        f"init_from={warm / 'last'}",
        "env.position_mode=none",
        "env.max_chunk_tokens=40",
        "model.question_weight=1.5",
    )
    from qrag_integrations import load_model

    model = load_model(str(pqn / "last"))
    assert model.config.extra["train_config"]["init_from"] == str(warm / "last")
    assert model.config.max_chunk_tokens == 40 and model.config.question_weight == 1.5
    assert load_model(str(warm / "last")).config.max_chunk_tokens != 40
    with pytest.raises(AssertionError, match="cannot start from"):
        train(
            tmp_path / "bad",
            tiny_bert_dir,
            1,
            f"init_from={warm / 'last'}",
            "env.position_mode=relative",
        )


def test_time_budget_stops_early_with_an_evaluation_and_a_save(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    """time_budget_minutes ends the run at the first update past the budget, evaluated and saved."""
    out = tmp_path / "run"
    train(out, tiny_bert_dir, 50, "time_budget_minutes=0.0001")
    rec = records(out)
    assert [r["step"] for r in rec] == [0, 1]
    assert "eval/fact_em" in rec[-1]
    state = json.loads((out / "last" / "train_state" / "state.json").read_text())
    assert state["agent"]["updates"] == 1
    assert (out / "best" / "qrag_config.json").is_file()


def shape(record: dict) -> tuple:
    """What a metrics row must share with the same row of an uninterrupted run. Values such as
    the loss differ after a resume (episodes in progress are not saved; rollouts restart)."""
    return record["step"], record.get("env_steps"), sorted(record)


def test_sigkill_during_checkpoint_writes_then_resume(tmp_path: Path, tiny_bert_dir: Path) -> None:
    """Killed at a random write (renames and clean-up included) of a `best` save, then of three
    `last` saves, each time resumed: the run ends at the same step as an uninterrupted one, with
    the same metric rows (none lost, none repeated) and loadable checkpoints."""
    whole = tmp_path / "whole"
    out = train(whole, tiny_bert_dir, 6, "seed=3", kill=("last", 0)).stdout
    # the most writes of one save: every killed run below makes at least that many
    writes = {
        k: max(map(int, v.split(",")))
        for k, v in (kv.split("=") for kv in out.rsplit("checkpoint writes: ", 1)[1].split())
    }
    assert writes["best"] >= 5 and writes["last"] > writes["best"], out[-2000:]

    run, rng = tmp_path / "killed", random.Random(0)
    for name in ("best", "last", "last", "last"):
        proc = train(
            run,
            tiny_bert_dir,
            6,
            "seed=3",
            "resume=true",
            kill=(name, rng.randint(1, writes[name])),
        )
        assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-3000:]
    train(run, tiny_bert_dir, 6, "seed=3", "resume=true")

    state = json.loads((run / "last" / "train_state" / "state.json").read_text())
    assert state["agent"]["updates"] == 6
    assert [shape(r) for r in records(run)] == [shape(r) for r in records(whole)]
    assert [r["step"] for r in records(run)] == list(range(7))
    # (each checkpoint keeps the lock file of its saves beside it)
    assert sorted(p.name for p in run.iterdir()) == [
        ".best.lock",
        ".last.lock",
        "best",
        "last",
        "metrics.jsonl",
        "report.json",
        "report.md",
        "tb",
    ]

    from qrag_integrations import load_model

    for name in ("last", "best"):
        assert (
            load_model(str(run / name)).config.extra["step"]
            == load_model(str(whole / name)).config.extra["step"]
        )


def test_a_continuation_distilling_toward_its_start_trains_and_resumes(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    """algo.distill_teacher=init with init_from, anchor_states and recovery states run end to end,
    and a resumed run rebuilds its teacher from init_from (trainer wiring)."""
    warm = tmp_path / "warm"
    hop = ["algo=next_hop", "algo.questions_per_step=2", "env.position_mode=none"]
    train(warm, tiny_bert_dir, 2, *hop)
    cont = tmp_path / "cont"
    options = [
        *hop,
        f"init_from={warm / 'last'}",
        "model.question_weight=1.0",
        "algo.distill_weight=1.0",
        "algo.distill_teacher=init",
        "algo.anchor_states=true",
        "algo.recovery_states=0.5",
    ]
    train(cont, tiny_bert_dir, 2, *options)
    proc = train(cont, tiny_bert_dir, 3, *options, "resume=true")
    assert [r["step"] for r in records(cont)] == [0, 1, 2, 3]
    assert "distill_loss" in records(cont)[-1], proc.stderr[-2000:]
