"""QRAGEmbeddings / QRAGLlamaEmbedding: the model's own chunk and state embeddings, batched."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings, QRAGLlamaEmbedding

TEXTS = [
    "mary went to the kitchen",
    "john picked up the apple",
    "the",
    "sandra moved to the garden there",
    "who",
]
QUESTION = "where is the apple"


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    torch.manual_seed(0)
    m = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()
    with torch.no_grad():  # make the two encoders differ, as in a trained checkpoint
        for p in m.state_encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m


@pytest.fixture
def chunk_calls(model: QRAGModel):
    """Batch sizes the chunk encoder sees during the test."""
    sizes: list[int] = []
    handle = model.chunk_encoder.register_forward_hook(
        lambda mod, args, out: sizes.append(out.shape[0])
    )
    yield sizes
    handle.remove()


def expected(model: QRAGModel) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        return model.embed_chunks(TEXTS), model.embed_states([QUESTION])[0]


def test_langchain_embeddings_are_the_models(model: QRAGModel) -> None:
    emb = QRAGEmbeddings(model, batch_size=2)
    docs, query = emb.embed_documents(TEXTS), emb.embed_query(QUESTION)
    chunks, state = expected(model)
    assert len(docs) == len(TEXTS) and all(len(d) == 32 for d in docs) and len(query) == 32
    assert torch.allclose(torch.tensor(docs), chunks, atol=1e-6)
    assert torch.allclose(torch.tensor(query), state, atol=1e-6)
    assert not torch.allclose(
        torch.tensor(query), torch.tensor(emb.embed_documents([QUESTION])[0]), atol=1e-3
    )
    assert asyncio.run(emb.aembed_documents(TEXTS)) == docs
    assert asyncio.run(emb.aembed_query(QUESTION)) == query


def test_langchain_batch_size(model: QRAGModel, chunk_calls: list[int]) -> None:
    sizes = chunk_calls
    QRAGEmbeddings(model, batch_size=2).embed_documents(TEXTS)
    assert sizes == [2, 2, 1]
    sizes.clear()
    QRAGEmbeddings(model).embed_documents(TEXTS)
    assert sizes == [5]
    for bad in (0, -1, 1.5):
        with pytest.raises(QRAGError, match="batch_size"):
            QRAGEmbeddings(model, batch_size=bad)
    with pytest.raises(QRAGError, match="list of strings"):
        QRAGEmbeddings(model).embed_documents("one text")


def test_llama_index_embedding_is_the_models(model: QRAGModel) -> None:
    emb = QRAGLlamaEmbedding(model, embed_batch_size=2)
    docs = emb.get_text_embedding_batch(TEXTS)
    chunks, state = expected(model)
    assert torch.allclose(torch.tensor(docs), chunks, atol=1e-6)
    assert torch.allclose(torch.tensor(emb.get_query_embedding(QUESTION)), state, atol=1e-6)
    assert torch.allclose(torch.tensor(emb.get_text_embedding(TEXTS[1])), chunks[1], atol=1e-6)
    assert torch.allclose(
        torch.tensor(asyncio.run(emb.aget_query_embedding(QUESTION))), state, atol=1e-6
    )
    assert torch.allclose(
        torch.tensor(asyncio.run(emb.aget_text_embedding_batch(TEXTS))), chunks, atol=1e-6
    )
    assert torch.allclose(
        torch.tensor(asyncio.run(emb.aget_text_embedding(TEXTS[0]))), chunks[0], atol=1e-6
    )


def test_llama_index_batch_size(model: QRAGModel, chunk_calls: list[int]) -> None:
    sizes = chunk_calls
    QRAGLlamaEmbedding(model, embed_batch_size=2).get_text_embedding_batch(TEXTS)
    assert sizes == [2, 2, 1]
    assert QRAGLlamaEmbedding(model).embed_batch_size == 64
    assert QRAGLlamaEmbedding(model).fingerprint == QRAGEmbeddings(model).fingerprint
