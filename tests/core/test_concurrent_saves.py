"""Saves to one path from two processes at once: the swap is locked (``.<name>.lock``), so the
path always ends as one process's complete save, never a mix, and nothing is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from concurrent_saver import K_OF, saver_texts
from faults import folder_bytes
from qrag_training.run_folder import save_run_checkpoint
from retriever_corpus import build_retriever

from qrag_integrations import QRAGError, QRAGRetriever, save_pretrained
from qrag_integrations.core import atomic
from qrag_integrations.core.atomic import lock_path

SAVER = Path(__file__).resolve().parents[1] / "concurrent_saver.py"
SAVES = 50


def wait_for(paths: list[Path], procs: list[subprocess.Popen], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a saver ended early: {proc.communicate()}")
        assert time.monotonic() < deadline, "the savers did not get ready"
        time.sleep(0.05)


def test_two_processes_saving_one_path_50_times_each_end_with_one_whole_save(
    tiny_bert_dir: Path, tmp_path: Path
):
    target = tmp_path / "saved"
    procs = [
        subprocess.Popen(
            [sys.executable, str(SAVER), str(tiny_bert_dir), str(target), name, str(SAVES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for name in ("A", "B")
    ]
    try:
        wait_for([tmp_path / "saved.ready-A", tmp_path / "saved.ready-B"], procs, 120)
        (tmp_path / "saved.go").touch()
        outcomes = [proc.communicate(timeout=240) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0], outcomes
    loaded = QRAGRetriever.load(target)
    name = "A" if loaded.index.ids[0].startswith("A") else "B"
    chunks = loaded.index.snapshot().chunks
    assert [c.id for c in chunks] == [f"{name}{i}" for i in range(4)]
    assert [c.text for c in chunks] == saver_texts(name) and loaded.k == K_OF[name]
    assert [d.id[0] for d in loaded.invoke("where is mary?")] == [name] * K_OF[name]
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("saved."))
    assert left == [".saved.lock", "saved"]  # no scratch folder, no previous save left over


def savers(retriever: QRAGRetriever) -> dict[str, Callable[[Path], None]]:
    """Every kind of save, each through the shared swap of ``qrag_integrations.core.atomic``."""
    return {
        "retriever": retriever.save,
        "checkpoint": lambda path: save_pretrained(retriever.model, path),
        "index": retriever.index.save,
        "trainer checkpoint": lambda path: save_run_checkpoint(
            path, retriever.model, "seed: 0\n", state={"step": 1}
        ),
    }


@pytest.mark.parametrize("kind", ["retriever", "checkpoint", "index", "trainer checkpoint"])
def test_a_save_waits_for_the_lock_another_process_holds(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch, kind
):
    retriever = build_retriever(tiny_bert_dir, ["mary went to the kitchen"], k=1)
    save, target = savers(retriever)[kind], tmp_path / "saved"
    save(target)
    before = folder_bytes(target)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(); "
                "print('held', flush=True); time.sleep(60)"
            ),
            str(lock_path(target)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(atomic, "LOCK_TIMEOUT_S", 0.5)
        retriever.add_texts(["john went to the garden"], ids=["new"])
        with pytest.raises(
            QRAGError,
            match=r"cannot save to .*saved: another process has held its lock .*\.saved\.lock for 0\.5 s",
        ):
            save(target)
        assert folder_bytes(target) == before
    finally:
        holder.kill()
        holder.wait()
        retriever.delete(["new"])
    save(target)  # the lock is free again
    assert sorted(p.name for p in tmp_path.iterdir()) == [".saved.lock", "saved"]
