"""A Q-RAG checkpoint as a LangChain ``Embeddings`` and a LlamaIndex ``BaseEmbedding``.

Documents go through the checkpoint's *chunk* encoder (the vectors the search scores), queries
through the *state* encoder on the bare question (the state of the search's first step). Use
them to write a vector store the store-backed search can read (``InMemoryVectorStore(
embedding=QRAGEmbeddings(model))``), or wherever a framework wants an embedding model.

This module imports LangChain and LlamaIndex; the core never imports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import torch
from langchain_core.embeddings import Embeddings
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from qrag_integrations.core.defaults import default_checkpoint
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.validation import check_options
from qrag_integrations.stores.rows import model_fingerprint


def _load(checkpoint: str | None, device: str) -> QRAGModel:
    return load_model(checkpoint or default_checkpoint(), device=device).eval()


def embed_documents(model: QRAGModel, texts: Sequence[str], batch_size: int) -> list[list[float]]:
    """Chunk-encoder embeddings of ``texts`` as float lists (what stores are written with)."""
    if isinstance(texts, str) or any(not isinstance(t, str) for t in texts):
        raise QRAGError("texts must be a list of strings")
    return model.embed_chunks(list(texts), batch_size=batch_size).float().cpu().tolist()


def embed_query(model: QRAGModel, text: str) -> list[float]:
    """State-encoder embedding of a bare question (the search's first state)."""
    if not isinstance(text, str):
        raise QRAGError(f"a query must be a string, got {type(text).__name__}")
    with torch.inference_mode():
        return model.embed_states([text])[0].float().cpu().tolist()


class QRAGEmbeddings(Embeddings):
    """LangChain ``Embeddings`` of a Q-RAG checkpoint.

    Instantiate:
        .. code-block:: python

            from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

            embeddings = QRAGEmbeddings.from_checkpoint("path/to/checkpoint", batch_size=32)
            store = InMemoryVectorStore(embedding=embeddings)
    """

    def __init__(self, model: QRAGModel, batch_size: int = 64, **options: Any) -> None:
        """Wrap a loaded model.

        Args:
            model: the Q-RAG model.
            batch_size: texts per chunk-encoder batch.
            **options: none; any name raises :class:`~qrag_integrations.core.errors.UnknownOptionError`
                naming the closest valid one (a misspelled ``batch_size`` is not ignored).
        """
        check_options(options, ("model", "batch_size"), "QRAGEmbeddings()")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise QRAGError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model = model.eval()
        self.batch_size = batch_size

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        **options: Any,
    ) -> QRAGEmbeddings:
        """Load a checkpoint folder or HF encoder name (default: the packaged model); any other
        keyword raises :class:`~qrag_integrations.core.errors.UnknownOptionError`."""
        check_options(
            options, ("checkpoint", "device", "batch_size"), "QRAGEmbeddings.from_checkpoint"
        )
        return cls(_load(checkpoint, device), batch_size=batch_size)

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the chunk encoder (recorded with every vector a Q-RAG ingest writes)."""
        return model_fingerprint(self.model)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Chunk-encoder embeddings, ``batch_size`` texts per encoder batch."""
        return embed_documents(self.model, texts, self.batch_size)

    def embed_query(self, text: str) -> list[float]:
        """State-encoder embedding of the bare question."""
        return embed_query(self.model, text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """:meth:`embed_documents` in a worker thread."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """:meth:`embed_query` in a worker thread."""
        return await asyncio.to_thread(self.embed_query, text)


class QRAGLlamaEmbedding(BaseEmbedding):
    """LlamaIndex ``BaseEmbedding`` of a Q-RAG checkpoint (``embed_batch_size`` texts per batch).

    Instantiate:
        .. code-block:: python

            from qrag_integrations.frameworks.embeddings import QRAGLlamaEmbedding

            embed_model = QRAGLlamaEmbedding.from_checkpoint("path/to/checkpoint", embed_batch_size=32)
            index = VectorStoreIndex(nodes, embed_model=embed_model)
    """

    _model: QRAGModel = PrivateAttr()

    def __init__(self, model: QRAGModel, embed_batch_size: int = 64, **kwargs: Any) -> None:
        """Wrap a loaded model.

        Args:
            model: the Q-RAG model.
            embed_batch_size: texts per chunk-encoder batch.
            **kwargs: other ``BaseEmbedding`` fields (``model_name``, ``callback_manager``...); any
                other name raises :class:`~qrag_integrations.core.errors.UnknownOptionError`.
        """
        check_options(kwargs, {"model", *BaseEmbedding.model_fields}, "QRAGLlamaEmbedding()")
        kwargs.setdefault("model_name", f"qrag:{model.config.base_model}")
        super().__init__(embed_batch_size=embed_batch_size, **kwargs)
        self._model = model.eval()

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: str | None = None,
        device: str = "cpu",
        embed_batch_size: int = 64,
        **kwargs: Any,
    ) -> QRAGLlamaEmbedding:
        """Load a checkpoint folder or HF encoder name (default: the packaged model); ``kwargs``
        as :meth:`__init__`'s."""
        check_options(
            kwargs,
            {"checkpoint", "device", *BaseEmbedding.model_fields},
            "QRAGLlamaEmbedding.from_checkpoint",
        )
        return cls(_load(checkpoint, device), embed_batch_size=embed_batch_size, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's serialisation name."""
        return "QRAGLlamaEmbedding"

    @property
    def model(self) -> QRAGModel:
        """The Q-RAG model."""
        return self._model

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the chunk encoder."""
        return model_fingerprint(self._model)

    def _get_query_embedding(self, query: str) -> list[float]:
        return embed_query(self._model, query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return embed_documents(self._model, [text], self.embed_batch_size)[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return embed_documents(self._model, texts, self.embed_batch_size)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
