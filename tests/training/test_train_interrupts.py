"""Ctrl-C and SIGTERM stop a run at a safe point: ``out_dir/last`` is saved (before the first
periodic checkpoint too), the command ends in one line, and ``resume=true`` continues from the
saved update, appending to ``metrics.jsonl``."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from qrag_training.evaluate import compose_config
from qrag_training.interrupts import Interrupted, StopRequests
from qrag_training.run_folder import append_metrics, read_metrics
from qrag_training.trainer import Trainer
from tiny_corpus import tiny_custom_run, write_corpus

REPO = Path(__file__).resolve().parents[2]


def send(signum: int) -> None:
    """A signal to this thread (the main one), whose Python handler runs before the next line.
    Not ``os.kill(os.getpid(), ...)``: the kernel may hand a process-wide signal to any thread,
    such as one of torch's or another library's native threads, and the handler then runs late."""
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


def test_a_run_started_over_keeps_the_earlier_lines(tmp_path: Path, tiny_bert_dir: Path) -> None:
    """resume=true without a training state (a process killed before any save) starts at
    update 0 and appends; the history read back is the new run's."""
    out = tmp_path / "run"
    tiny_trainer(tmp_path, tiny_bert_dir, 2).train()
    before = (out / "metrics.jsonl").read_bytes()
    shutil.rmtree(out / "last")
    tiny_trainer(tmp_path, tiny_bert_dir, 2, "resume=true").train()
    after = (out / "metrics.jsonl").read_bytes()
    assert after.startswith(before) and len(after.splitlines()) == 2 * len(before.splitlines())
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [0, 1, 2]


def test_metrics_lines_are_appended_after_a_torn_one(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "lo', encoding="utf-8")
    append_metrics(path, {"step": 2, "loss": 1.0})
    append_metrics(path, {"step": 3})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[2] == '{"step": 2, "lo' and len(lines) == 5
    assert read_metrics(path) == [{"step": 0}, {"step": 1}, {"step": 2, "loss": 1.0}, {"step": 3}]


# -- the command ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_command_stopped_by_a_signal_says_so_in_one_line(
    tmp_path: Path, tiny_bert_dir: Path, signum: int
) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", documents=30, per_document=3)
    out = tmp_path / "run"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "training"), str(REPO)])
    cmd = [sys.executable, "-m", "qrag_training.train"]
    cmd += tiny_custom_run(tiny_bert_dir, out, corpus, steps=100_000)
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300  # a guard against a hang, not a speed check
        while time.monotonic() < deadline and proc.poll() is None:
            rows = read_metrics(out / "metrics.jsonl") if (out / "metrics.jsonl").exists() else []
            if rows and rows[-1]["step"] >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
        proc.send_signal(signum)
        stdout, stderr = (s.decode() for s in proc.communicate(timeout=300))
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, stderr[-3000:]
    last_line = stderr.strip().splitlines()[-1]
    found = re.fullmatch(
        rf"qrag-train: interrupted \({signal.Signals(signum).name}\) at update (\d+) of 100000: "
        rf"saved {re.escape(str(out / 'last'))}; continue with the same command and resume=true",
        last_line,
    )
    assert found, stderr[-3000:]
    assert "Traceback" not in stdout + stderr
    update = int(found.group(1))
    assert update >= 2 and state_update(out) == update
    assert read_metrics(out / "metrics.jsonl")[-1]["step"] == update
