"""Progress of long builds where no bar can be drawn (a log file, a CI job): log lines every few
seconds; ``show_progress=False`` silences them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from qrag_integrations import QRAGRetriever
from qrag_integrations.core import progress
from qrag_integrations.core.progress import LogProgress

TEXTS = [f"Chunk {i}: Mary went to the kitchen and John took apple {i}." for i in range(2000)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_interval_and_a_last_one(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    with (
        caplog.at_level(logging.INFO, logger="qrag_integrations"),
        LogProgress(100, "embedding chunks", every_s=5.0, clock=clock) as bar,
    ):
        for _ in range(10):
            clock.now += 2.0  # 10 updates of 10 chunks, 2 s apart
            bar.update(10)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "embedding chunks: 30/100 chunks (30%) in 6 s, about 14 s left",
        "embedding chunks: 60/100 chunks (60%) in 12 s, about 8 s left",
        "embedding chunks: 90/100 chunks (90%) in 18 s, about 2 s left",
        "embedding chunks: 100/100 chunks (100%) in 20 s",
    ]


def test_a_pass_shorter_than_the_interval_writes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.INFO, logger="qrag_integrations"),
        LogProgress(10, "x", every_s=5.0, clock=FakeClock()) as bar,
    ):
        bar.update(10)
    assert caplog.records == []


@pytest.fixture
def log_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A log file the ``qrag_integrations`` logger writes INFO lines to, a line per update."""
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    monkeypatch.setattr(progress, "_drawable", lambda: False)  # as under nohup, CI, a log file
    file = tmp_path / "build.log"
    handler = logging.FileHandler(file, encoding="utf-8")
    log = logging.getLogger("qrag_integrations")
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield file
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
        handler.close()


def test_a_2000_chunk_build_writes_progress_lines_to_a_log_file(
    tiny_bert_dir: Path, log_file: Path
) -> None:
    QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir))
    lines = [line for line in log_file.read_text().splitlines() if "embedding chunks" in line]
    assert len(lines) >= 10
    assert lines[0].startswith("embedding chunks: 64/2000 chunks")
    assert lines[-1].startswith("embedding chunks: 2000/2000 chunks (100%)")


def test_show_progress_false_silences_it(tiny_bert_dir: Path, log_file: Path) -> None:
    QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), show_progress=False)
    assert "embedding chunks" not in log_file.read_text()
