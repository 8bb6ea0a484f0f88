"""The OpenVINO backend: torch's embeddings in float32, close ones in bf16, the ONNX export shared
and cached, clear errors when the library is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from retriever_corpus import BABI_TEXTS

from qrag_integrations import QRAGRetriever
from qrag_integrations.core import openvino_backend
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.onnx_backend import onnx_encoder

TEXTS = list(BABI_TEXTS[:6])


@pytest.fixture
def model(tiny_bert_dir: Path) -> QRAGModel:
    return QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()


def test_float32_embeddings_equal_torch(model: QRAGModel, tmp_path: Path) -> None:
    with torch.inference_mode():
        chunks, states = model.embed_chunks(TEXTS), model.embed_states(TEXTS[:2])
    model.set_backend("openvino", cache_dir=tmp_path)
    assert model.inference_backend == ("openvino", None)
    assert model._inference["chunk"].precision == "f32"
    with torch.inference_mode():
        torch.testing.assert_close(model.embed_chunks(TEXTS), chunks, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(model.embed_states(TEXTS[:2]), states, atol=1e-5, rtol=1e-4)
    assert model.embed_states(TEXTS[:1]).requires_grad  # training encodes with torch


def test_bf16_stays_close_and_shares_the_onnx_export(model: QRAGModel, tmp_path: Path) -> None:
    with torch.inference_mode():
        reference = model.embed_chunks(TEXTS)
    model.set_backend("openvino", "bf16", cache_dir=tmp_path)
    with torch.inference_mode():
        fast = model.embed_chunks(TEXTS)
    assert fast.dtype == torch.float32
    assert torch.nn.functional.cosine_similarity(fast, reference, dim=-1).min() > 0.99
    onnx = onnx_encoder(model.chunk_encoder, cache_dir=tmp_path)  # the same cached file
    assert onnx.path == model._inference["chunk"].path


def test_bf16_without_cpu_support_warns_and_runs_float32(
    model: QRAGModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    monkeypatch.setattr(openvino_backend, "_has_bf16", lambda core: False)
    model.set_backend("openvino", "bf16", cache_dir=tmp_path)
    assert model._inference["state"].precision == "f32"
    assert "no bfloat16 instructions" in caplog.text


def test_missing_openvino_is_a_clear_error(
    model: QRAGModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(QRAGError, match=r"pip install 'qrag-integrations\[openvino\]'"):
        model.set_backend("openvino", cache_dir=tmp_path)
    assert model.inference_backend == ("torch", None) and model._inference is None
    with pytest.raises(QRAGError, match="backend='openvino' must be one of None, 'bf16'"):
        model.set_backend("openvino", "int8", cache_dir=tmp_path)


def test_the_retriever_finds_the_same_chunks(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QRAG_CACHE_DIR", str(tmp_path))
    plain = QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), k=3)
    fast = QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), k=3, backend="openvino")
    for q in ("where is the football?", "who went to the kitchen?"):
        assert [d.page_content for d in fast.invoke(q)] == [d.page_content for d in plain.invoke(q)]
