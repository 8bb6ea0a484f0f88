"""bfloat16 autocast inference (``quantize="bf16"``): float32 embeddings close to float32 compute,
gradients on still take plain torch, and the CPU check that ``"auto"`` settings rely on."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from qrag_integrations import QRAGRetriever
from qrag_integrations.core import precision
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.precision import bf16_autocast, bf16_is_fast

TEXTS = [
    "mary went to the kitchen.",
    "john moved to the garden and then to the office.",
    "the football is in the hallway.",
    "sandra took the apple to the bedroom.",
]


@pytest.fixture
def model(tiny_bert_dir: Path) -> QRAGModel:
    return QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()


def test_bf16_embeddings_are_float32_and_close(model: QRAGModel) -> None:
    with torch.inference_mode():
        chunks, states = model.embed_chunks(TEXTS), model.embed_states(TEXTS[:2])
    model.set_backend("torch", quantize="bf16")
    with torch.inference_mode():
        fast_chunks, fast_states = model.embed_chunks(TEXTS), model.embed_states(TEXTS[:2])
    assert fast_chunks.dtype == fast_states.dtype == torch.float32
    assert not torch.equal(fast_chunks, chunks)  # it did run in bfloat16
    for fast, plain in ((fast_chunks, chunks), (fast_states, states)):
        assert torch.nn.functional.cosine_similarity(fast, plain, dim=-1).min() > 0.99
    # with gradients on (training) the encoders run in float32
    torch.testing.assert_close(model.embed_states(TEXTS[:2]).detach(), states)
    model.set_backend("torch")
    with torch.inference_mode():
        torch.testing.assert_close(model.embed_chunks(TEXTS), chunks)


def test_autocast_context_is_off_when_disabled() -> None:
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with bf16_autocast("cpu", enabled=False):
        assert layer(x).dtype == torch.float32
    with bf16_autocast("cpu"):
        assert layer(x).dtype == torch.bfloat16


def test_bf16_is_fast_reads_the_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert bf16_is_fast("cpu")
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert not bf16_is_fast("cpu")
    assert not bf16_is_fast("meta")


def test_the_retriever_takes_bf16(tiny_bert_dir: Path) -> None:
    fast = QRAGRetriever.from_texts(TEXTS, checkpoint=str(tiny_bert_dir), k=2, quantize="bf16")
    assert len(fast.invoke("where is the football?")) == 2
