"""Saves record a digest of each file they write; loads check them: a damaged file is refused by
name with what to do, an older save without digests loads with one warning, and the packaged
checkpoints carry theirs (no warning)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
import torch
from saved_folders import drop_digests

from qrag_integrations import ChunkIndex, QRAGConfig, QRAGModel, QRAGRetriever, load_model
from qrag_integrations.core.digests import (
    DIGESTS_KEY,
    collect_undigested,
    files_under,
    verify_files,
)
from qrag_integrations.core.errors import CheckpointError, DamagedCheckpointError, DamagedFileError

ASSETS = Path(__file__).resolve().parents[2] / "qrag_integrations" / "assets"


def flip_bit(file: Path, at: int, bit: int = 0) -> None:
    data = bytearray(file.read_bytes())
    data[at] ^= 1 << bit
    file.write_bytes(bytes(data))


@pytest.fixture
def saved_index(tmp_path: Path) -> Path:
    index = ChunkIndex(8)
    index.add(["a", "b", "c"], torch.randn(3, 8), metadatas=[{"n": i} for i in range(3)])
    index.save(tmp_path / "idx")
    return tmp_path / "idx"


def test_one_flipped_bit_in_the_embeddings_is_refused_by_name(saved_index: Path) -> None:
    file = saved_index / "embeddings.safetensors"
    flip_bit(file, file.stat().st_size - 3)  # a value, not the header
    with pytest.raises(DamagedFileError, match=r"corrupt .*embeddings\.safetensors.*rebuild"):
        ChunkIndex.load(saved_index)


def test_an_edited_manifest_value_is_refused(saved_index: Path) -> None:
    manifest = json.loads((saved_index / "index.json").read_text())
    manifest["doc_rank"] = {k: v + 1 for k, v in manifest["doc_rank"].items()}
    (saved_index / "index.json").write_text(json.dumps(manifest))
    with pytest.raises(DamagedFileError, match=r"corrupt .*index\.json: its content differs"):
        ChunkIndex.load(saved_index)


def test_a_lost_file_is_named(saved_index: Path) -> None:
    (saved_index / "records.jsonl").unlink()
    with pytest.raises(DamagedFileError, match=r"records\.jsonl is missing"):
        ChunkIndex.load(saved_index)


def test_a_flipped_bit_in_checkpoint_weights_is_refused(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    model.save_pretrained(str(tmp_path / "ckpt"))
    manifest = json.loads((tmp_path / "ckpt" / "qrag_config.json").read_text())
    assert "README.md" not in manifest[DIGESTS_KEY]["files"]  # the card is not read on load
    file = tmp_path / "ckpt" / "trained_weights.safetensors"
    flip_bit(file, file.stat().st_size - 5, 3)
    with pytest.raises(DamagedCheckpointError, match=r"trained_weights.*download or export"):
        load_model(str(tmp_path / "ckpt"))
    assert issubclass(DamagedCheckpointError, CheckpointError)


def test_a_save_without_digests_loads_with_one_warning(
    saved_index: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = ChunkIndex.load(saved_index)
    drop_digests(saved_index / "index.json")
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        after = ChunkIndex.load(saved_index)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "saved without file digests" in warnings[0].getMessage()
    assert torch.equal(before.snapshot().embeddings, after.snapshot().embeddings)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_old_checkpoint_loads_with_one_warning(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    load_model(str(tiny_bert_dir)).save_pretrained(str(tmp_path / "ckpt"))
    drop_digests(tmp_path / "ckpt" / "qrag_config.json")
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        load_model(str(tmp_path / "ckpt"))
    (warning,) = warnings_of(caplog)
    assert "ckpt was saved without file digests" in warning and "save it again" in warning


def test_an_old_retriever_save_loads_with_one_warning_then_saves_with_digests(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A saved retriever without digests anywhere (retriever.json, index/, model/) warns once
    for the save, not once per folder; saved again, it loads without a warning."""
    load_model(str(tiny_bert_dir)).save_pretrained(str(tmp_path / "ckpt"))
    texts = ["Mary went to the kitchen.", "John took the apple.", "The sky is blue."]
    QRAGRetriever.from_texts(texts, checkpoint=str(tmp_path / "ckpt"), k=2).save(tmp_path / "r")
    for manifest in ("retriever.json", "index/index.json", "model/qrag_config.json"):
        drop_digests(tmp_path / "r" / manifest)
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        loaded = QRAGRetriever.load(tmp_path / "r")
    (warning,) = warnings_of(caplog)
    assert "r was saved without file digests (in retriever.json, model, index)" in warning
    assert "save it again" in warning
    caplog.clear()
    loaded.save(tmp_path / "r")
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        QRAGRetriever.load(tmp_path / "r")
    assert warnings_of(caplog) == []


def test_collecting_in_one_thread_leaves_another_threads_warning(
    saved_index: Path, caplog: pytest.LogCaptureFixture
) -> None:
    drop_digests(saved_index / "index.json")
    manifest = json.loads((saved_index / "index.json").read_text())
    other = threading.Thread(target=verify_files, args=(saved_index, manifest, "index.json", "-"))
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        with collect_undigested() as found:
            verify_files(saved_index, manifest, "index.json", "-")
            other.start()
            other.join()
        assert found == [saved_index]
    assert len(warnings_of(caplog)) == 1  # the other thread's


@pytest.mark.parametrize("asset", sorted(p.name for p in ASSETS.glob("*_checkpoint")))
def test_the_packaged_checkpoints_carry_digests_that_match(
    asset: str, caplog: pytest.LogCaptureFixture
) -> None:
    folder = ASSETS / asset
    manifest = json.loads((folder / "qrag_config.json").read_text())
    recorded = set(manifest[DIGESTS_KEY]["files"])
    assert recorded == set(files_under(folder, skip={"README.md", "qrag_config.json"}))
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        verify_files(folder, manifest, "qrag_config.json", "reinstall")
    assert caplog.records == []


def test_the_shipped_default_loads_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        load_model("packaged:qrag-babi-demo")
    assert caplog.records == []


def test_a_digest_of_a_file_outside_the_folder_is_refused(saved_index: Path) -> None:
    manifest = json.loads((saved_index / "index.json").read_text())
    manifest[DIGESTS_KEY]["files"]["../outside"] = "0"
    with pytest.raises(DamagedFileError, match="records a file outside"):
        verify_files(saved_index, manifest, "index.json", "rebuild")
