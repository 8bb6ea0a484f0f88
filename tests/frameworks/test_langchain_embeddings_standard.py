"""LangChain's standard embeddings integration suite run against ``QRAGEmbeddings`` (tiny BERT)."""

from __future__ import annotations

import functools

import pytest
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from test_langchain_standard import _tiny_bert_path

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings


@functools.cache
def _tiny_model() -> QRAGModel:
    return QRAGModel.from_base(QRAGConfig(base_model=_tiny_bert_path())).eval()


class TestQRAGEmbeddingsStandard(EmbeddingsIntegrationTests):
    pytestmark = pytest.mark.anyio  # strict pytest-asyncio: the suite's async tests need a mark

    @property
    def embeddings_class(self) -> type[QRAGEmbeddings]:
        return QRAGEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model": _tiny_model(), "batch_size": 2}
