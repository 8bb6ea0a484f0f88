"""The frozen-layer cache gives the plain encoder's embeddings and gradients, computing less."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from qrag_training.frozen_cache import FrozenLayerCache

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel

TEXTS = [
    "the cat sat on the mat.",
    "mary went to the kitchen and then to the garden where the dog was.",
    "a dog is red.",
    "the sky is blue today.",
    "the cat sat on the mat.",  # a repeat
    "john took the apple.",
]


@pytest.fixture
def model(tiny_bert_dir: Path) -> QRAGModel:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    return model.eval()


def cache_of(model: QRAGModel, **kwargs) -> FrozenLayerCache:
    cfg = model.config
    return FrozenLayerCache(
        model.chunk_encoder, 1, model.tokenize, cfg.max_chunk_tokens, dtype=torch.float32, **kwargs
    )


def test_same_embeddings_and_gradients_as_the_plain_encoder(model: QRAGModel) -> None:
    cache = cache_of(model)
    plain = model.embed_chunks_grad(TEXTS, batch_size=4)
    cached = cache.embed(TEXTS, batch_size=4)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)
    assert cache.misses == 5 and cache.hits == 0  # one repeat

    weights = torch.randn_like(plain)
    grads = []
    for out in (plain, cached):
        model.zero_grad(set_to_none=True)
        (out * weights).sum().backward(retain_graph=True)
        grads.append([p.grad.clone() for p in model.chunk_encoder.parameters() if p.requires_grad])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_a_second_step_runs_no_frozen_layer(model: QRAGModel) -> None:
    cache = cache_of(model)
    cache.embed(TEXTS[:3])
    calls = []
    bottom = model.chunk_encoder.layers()[0]
    hook = bottom.register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        again = cache.embed(TEXTS[:3])
    finally:
        hook.remove()
    assert calls == [] and cache.hits == 3 and again.requires_grad
    # the encoder has its own layers back
    assert model.chunk_encoder.layers()[0] is bottom


def test_the_cache_keeps_within_its_budget(model: QRAGModel) -> None:
    cache = cache_of(model, max_mb=0.001)  # ~1 KB: a chunk or two of the tiny model
    cache.embed(TEXTS)
    assert cache.megabytes <= 0.001 + 1e-9 or len(cache._outputs) == 1
    torch.testing.assert_close(cache.embed(TEXTS), model.embed_chunks_grad(TEXTS))


def test_only_frozen_layers_may_be_cached(tiny_bert_dir: Path) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))  # everything trains
    with pytest.raises(ValueError, match="must be frozen"):
        cache_of(model)
    with pytest.raises(ValueError, match="frozen must be in 1..2"):
        FrozenLayerCache(model.chunk_encoder, 3, model.tokenize, 64)
