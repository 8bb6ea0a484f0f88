"""A save that fails at any one of its file writes leaves the previous save exactly as it was
(byte for byte, and loadable) and no scratch folder behind: for every n, the n-th write of
``QRAGRetriever.save``, ``save_pretrained`` (full and partial), ``ChunkIndex.save`` and the
trainer's ``save_run_checkpoint`` is made to fail (see ``tests/faults.py`` for what counts as
a write)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from faults import Faults, InjectedFault, folder_bytes, injected, scratch_left
from qrag_training.run_folder import load_train_state, rng_state, save_run_checkpoint
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import ChunkIndex, QRAGConfig, QRAGModel, QRAGRetriever, load_model
from qrag_integrations.core.atomic import lock_path


def check_every_interruption(
    tmp_path: Path, save: Callable[[Path], None], state: Callable[[Path], Any]
) -> int:
    """``tmp_path / "out"`` holds a save; ``save(path)`` writes a different one. Fail each of its
    writes in turn and check what is left; then let it succeed. Returns the number of writes."""
    target = tmp_path / "out"
    shutil.copytree(target, tmp_path / "count")
    shutil.copy(
        lock_path(target), lock_path(tmp_path / "count")
    )  # the lock file stays after a save
    with injected(Faults(tmp_path)) as counted:
        save(tmp_path / "count")
    shutil.rmtree(tmp_path / "count")
    writes = len(counted.seen)
    assert writes >= 5, counted.seen
    files, loaded = folder_bytes(target), state(target)
    for n in range(1, writes + 1):
        with injected(Faults(tmp_path, fail_at=n)), pytest.raises(InjectedFault):
            save(target)
        assert folder_bytes(target) == files, f"write {n}: {counted.seen[n - 1]}"
        assert scratch_left(tmp_path) == [], f"write {n}: {counted.seen[n - 1]}"
        assert state(target) == loaded, f"write {n}: {counted.seen[n - 1]}"
    with injected(Faults(tmp_path, fail_at=writes + 1)):
        save(target)
    assert state(target) != loaded and scratch_left(tmp_path) == []
    return writes


def perturbed(model: QRAGModel, seed: int) -> QRAGModel:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


def model_state(path: Path) -> list[float]:
    """What a loaded checkpoint computes (a few embedding values)."""
    with torch.no_grad():
        return load_model(str(path)).embed_chunks(["mary went to the kitchen"])[0, :6].tolist()


def test_retriever_save(tmp_path: Path, tiny_bert_dir: Path) -> None:
    r = build_retriever(tiny_bert_dir, BABI_TEXTS[:6], ids=chunk_ids(BABI_TEXTS[:6]), k=2)
    r.save(tmp_path / "out")
    r.add_texts(["Emma went to the city."], ids=["new"])

    def state(path: Path) -> tuple:
        loaded = QRAGRetriever.load(path)
        return tuple(loaded.index.ids), tuple(d.id for d in loaded.invoke(BABI_QUESTIONS[0]))

    check_every_interruption(tmp_path, r.save, state)


@pytest.mark.parametrize("trainable_layers", [None, 1], ids=["full", "partial"])
def test_save_pretrained(tmp_path: Path, tiny_bert_dir: Path, trainable_layers: int | None) -> None:
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=trainable_layers)
    )
    perturbed(model, 0).save_pretrained(str(tmp_path / "out"))
    perturbed(model, 1)
    check_every_interruption(tmp_path, lambda p: model.save_pretrained(str(p)), model_state)


def test_index_save(tmp_path: Path) -> None:
    index = ChunkIndex(8)
    index.add(["a", "b"], torch.randn(2, 8), metadatas=[{"n": 1}, {"n": 2}], ids=["a", "b"])
    index.save(tmp_path / "out")
    index.add(["c"], torch.randn(1, 8), ids=["c"])

    def state(path: Path) -> tuple:
        loaded = ChunkIndex.load(path)
        return tuple(loaded.ids), loaded.snapshot().embeddings.sum().item()

    check_every_interruption(tmp_path, index.save, state)


def test_trainer_checkpoint_with_training_state(tmp_path: Path, tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])

    def save(path: Path, step: int = 2) -> None:
        rng_json, rng_tensors = rng_state()
        save_run_checkpoint(
            path,
            model,
            f"steps: {step}\n",
            state={"step": step, "rng": rng_json},
            tensors=rng_tensors,
            optimizer_state=optimizer.state_dict(),
        )

    save(tmp_path / "out", step=1)
    perturbed(model, 1)

    def state(path: Path) -> tuple:
        saved, _, _ = load_train_state(path)
        return saved["step"], (path / "train_config.yaml").read_text(), tuple(model_state(path))

    check_every_interruption(tmp_path, save, state)
