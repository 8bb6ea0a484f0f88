"""The cases of test_train_interrupts.py that send signals to their own process, and the helpers
both share; that test runs this file in a fresh process (``pytest
tests/training/signal_cases.py``): its name keeps it out of the suite's own collection."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from qrag_training.evaluate import compose_config
from qrag_training.interrupts import Interrupted, StopRequests
from qrag_training.run_folder import read_metrics
from qrag_training.trainer import Trainer
from tiny_corpus import tiny_custom_run, write_corpus


def send(signum: int) -> None:
    """A signal to this thread (the main one), whose Python handler runs before the next line."""
    signal.raise_signal(signum)


# -- the stop requests ----------------------------------------------------------------------------
def test_a_first_signal_waits_for_deferred_work_a_second_does_not() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stops = StopRequests()
    with stops, stops.deferred():
        send(signal.SIGTERM)
        assert stops.requested and stops.signum == signal.SIGTERM
        with pytest.raises(Interrupted) as again:
            send(signal.SIGINT)
        assert again.value.again and again.value.exit_status == 128 + signal.SIGINT
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handlers are back


def test_outside_deferred_work_and_inside_abortable_work_a_signal_raises_at_once() -> None:
    stops = StopRequests()
    with stops, pytest.raises(Interrupted, match=r"interrupted \(SIGINT\)"):
        send(signal.SIGINT)
    stops = StopRequests()
    with stops, stops.deferred():
        with pytest.raises(Interrupted) as info, stops.abortable():
            send(signal.SIGTERM)
        assert not info.value.again and stops.requested
        with pytest.raises(Interrupted), stops.abortable():  # one already received
            pass


# -- the trainer, in this process ---------------------------------------------------------------
def tiny_trainer(tmp_path: Path, tiny_bert_dir: Path, steps: int, *extra: str) -> Trainer:
    corpus = tmp_path / "corpus.jsonl"
    if not corpus.exists():
        write_corpus(corpus, documents=30, per_document=3)
    overrides = tiny_custom_run(tiny_bert_dir, tmp_path / "run", corpus, steps)
    return Trainer(compose_config("custom", [*overrides[1:], *extra]))


def signal_at_update(trainer: Trainer, update: int, signum: int) -> None:
    """Send ``signum`` to this process during the update that makes ``update``."""
    step = trainer.agent.step

    def step_and_signal(*args, **kwargs):
        out = step(*args, **kwargs)
        if trainer.agent.updates == update:
            send(signum)
        return out

    trainer.agent.step = step_and_signal  # type: ignore[method-assign]


def state_update(out: Path) -> int:
    state = json.loads((out / "last" / "train_state" / "state.json").read_text())
    return state["agent"]["updates"]


def test_a_stopped_run_saves_last_and_resumes_appending_to_its_metrics(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    out = tmp_path / "run"
    trainer = tiny_trainer(tmp_path, tiny_bert_dir, 6)
    signal_at_update(trainer, 3, signal.SIGTERM)
    with pytest.raises(Interrupted) as info:
        trainer.train()
    assert str(info.value) == (
        f"interrupted (SIGTERM) at update 3 of 6: saved {out / 'last'}; continue with the same "
        "command and resume=true"
    )
    assert state_update(out) == 3  # no periodic save was due before update 6
    assert not (out / "report.md").exists()
    before = (out / "metrics.jsonl").read_bytes()
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [0, 1, 2, 3]

    resumed = tiny_trainer(tmp_path, tiny_bert_dir, 6, "resume=true")
    assert resumed.agent.updates == 3 and resumed.train_seconds > 0  # its budget continues
    resumed.train()
    after = (out / "metrics.jsonl").read_bytes()
    assert after.startswith(before)  # every earlier line kept, byte for byte
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert rows[-1]["seconds"] >= rows[3]["seconds"] and "eval/fact_em" in rows[-1]
    assert state_update(out) == 6


def test_a_signal_during_an_evaluation_drops_it_and_saves_before_any_update(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    out = tmp_path / "run"
    trainer = tiny_trainer(tmp_path, tiny_bert_dir, 6)
    evaluate = trainer.evaluate

    def evaluate_and_signal():
        send(signal.SIGINT)
        return evaluate()

    trainer.evaluate = evaluate_and_signal  # type: ignore[method-assign]
    with pytest.raises(Interrupted, match=r"interrupted \(SIGINT\) at update 0 of 6"):
        trainer.train()
    assert state_update(out) == 0 and not (out / "best").exists()
    assert not (out / "metrics.jsonl").exists()  # the dropped evaluation logged nothing
