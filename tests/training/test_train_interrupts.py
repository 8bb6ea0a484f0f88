"""Ctrl-C and SIGTERM stop a run at a safe point: ``out_dir/last`` is saved (before the first
periodic checkpoint too), the command ends in one line, and ``resume=true`` continues from the
saved update, appending to ``metrics.jsonl``."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from qrag_training.run_folder import append_metrics, read_metrics
from signal_cases import state_update, tiny_trainer
from tiny_corpus import tiny_custom_run, write_corpus

REPO = Path(__file__).resolve().parents[2]


def test_the_self_signalling_cases_pass_in_a_fresh_process(tmp_path: Path) -> None:
    """signal_cases.py (a stop request, the trainer stopped by a signal, resumed) signals its
    own process, so it runs in a fresh one: the suite's process has loaded many native libraries
    by then, and once ended with a segmentation fault at the first of these cases (CI,
    2026-12-02; never with tests/training alone)."""
    cases = (Path(__file__).parent / "signal_cases.py").relative_to(REPO).as_posix()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", cases]
    cmd += ["--basetemp", str(tmp_path / "cases")]
    proc = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b4 passed\b", proc.stdout), proc.stdout[-2000:]


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
