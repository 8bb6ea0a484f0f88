"""The ONNX Runtime backend: the same embeddings and picks as torch, an export cached and checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from qrag_integrations import QRAGRetriever
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.onnx_backend import MANIFEST_FILE, ONNX_FILE, onnx_encoder

TEXTS = [
    "mary went to the kitchen.",
    "john moved to the garden and then to the office.",
    "the football is in the hallway.",
    "sandra took the apple to the bedroom.",
    "daniel journeyed to the bathroom.",
]


@pytest.fixture
def model(tiny_bert_dir: Path) -> QRAGModel:
    return QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()


def test_onnx_embeddings_equal_torch(model: QRAGModel, tmp_path: Path) -> None:
    with torch.inference_mode():
        chunks, states = model.embed_chunks(TEXTS), model.embed_states(TEXTS[:2])
    model.set_backend("onnx", cache_dir=tmp_path)
    with torch.inference_mode():
        torch.testing.assert_close(model.embed_chunks(TEXTS), chunks, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(model.embed_states(TEXTS[:2]), states, atol=1e-5, rtol=1e-4)
    # with gradients on (training) the state encoder is torch's
    assert model.embed_states(TEXTS[:1]).requires_grad
    model.set_backend("torch")
    assert model._inference is None


def test_int8_stays_close(model: QRAGModel, tmp_path: Path) -> None:
    with torch.inference_mode():
        reference = model.embed_chunks(TEXTS)
    model.set_backend("onnx", quantize="int8", cache_dir=tmp_path)
    with torch.inference_mode():
        quantized = model.embed_chunks(TEXTS)
    cosine = torch.nn.functional.cosine_similarity(quantized, reference, dim=-1)
    assert cosine.min() > 0.95


def test_the_export_is_cached_and_checked(model: QRAGModel, tmp_path: Path, caplog) -> None:
    first = onnx_encoder(model.chunk_encoder, cache_dir=tmp_path)
    (entry,) = entries(tmp_path)
    manifest = json.loads((entry / MANIFEST_FILE).read_text())
    assert manifest["key"]["quantize"] is None and first.path == entry / ONNX_FILE
    stamp = (entry / ONNX_FILE).stat().st_mtime_ns
    onnx_encoder(model.chunk_encoder, cache_dir=tmp_path)  # read back, not exported again
    assert (entry / ONNX_FILE).stat().st_mtime_ns == stamp
    (entry / ONNX_FILE).write_bytes(b"garbled")  # a damaged entry is exported again
    again = onnx_encoder(model.chunk_encoder, cache_dir=tmp_path)
    assert "does not match its SHA-256" in caplog.text
    ids = model.tokenize(TEXTS[:1], 32)
    with torch.inference_mode():
        torch.testing.assert_close(again(**ids), model.chunk_encoder(**ids), atol=1e-5, rtol=1e-4)
    # other weights, another entry
    with torch.no_grad():
        next(model.chunk_encoder.parameters()).add_(0.1)
    onnx_encoder(model.chunk_encoder, cache_dir=tmp_path)
    assert len(entries(tmp_path)) == 2


def test_a_foreign_folder_is_not_replaced(model: QRAGModel, tmp_path: Path) -> None:
    onnx_encoder(model.state_encoder, cache_dir=tmp_path)
    (entry,) = entries(tmp_path)
    (entry / "notes.txt").write_text("mine")
    with pytest.raises(QRAGError, match="refusing the encoder cache folder"):
        onnx_encoder(model.state_encoder, cache_dir=tmp_path)
    assert (entry / "notes.txt").read_text() == "mine"


def entries(root: Path) -> list[Path]:
    """Cache entries (each save keeps a ``.<entry>.lock`` file beside its folder)."""
    return [p for p in root.iterdir() if not p.name.startswith(".")]


def test_bad_settings_are_refused(model: QRAGModel, tmp_path: Path) -> None:
    with pytest.raises(QRAGError, match="backend must be one of torch, onnx, openvino"):
        model.set_backend("tensorrt")
    with pytest.raises(QRAGError, match="backend='torch' must be one of None, 'bf16', got 'int8'"):
        model.set_backend("torch", quantize="int8")
    with pytest.raises(QRAGError, match="backend='onnx' must be one of None, 'int8', got 'int4'"):
        model.set_backend("onnx", quantize="int4", cache_dir=tmp_path)
    with pytest.raises(QRAGError, match="backend='onnx' must be one of None, 'int8', got 'bf16'"):
        model.set_backend("onnx", quantize="bf16", cache_dir=tmp_path)


def test_the_retriever_finds_the_same_chunks(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("QRAG_CACHE_DIR", str(tmp_path))
    plain = QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), k=3)
    fast = QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), k=3, backend="onnx")
    for q in ("where is the football?", "who went to the kitchen?"):
        assert [d.page_content for d in fast.invoke(q)] == [d.page_content for d in plain.invoke(q)]
    assert (tmp_path / "onnx").is_dir()
