"""Where a retriever's chunks live, behind one interface: the in-memory :class:`IndexCorpus`
here, or a vector store (:class:`~qrag_integrations.stores.corpus.StoreCorpus`).

The retriever (LangChain / LlamaIndex face) holds one corpus and asks it to add, delete, get,
count and search; it never needs to know which kind it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from qrag_integrations.core import validation
from qrag_integrations.core.chunks import Chunk
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import Hit, MultiStepSearcher, SearchSettings


class Corpus(Protocol):
    """The chunks a retriever searches and the search over them."""

    model: QRAGModel
    policy: SearchPolicy
    """The search policy the searches run by."""

    def __len__(self) -> int: ...

    def add(
        self,
        texts: list[str],
        metadatas: Sequence[dict[str, Any]] | None,
        ids: Sequence[str] | None,
        doc_ids: list[str],
        batch_size: int,
        show_progress: bool,
        replace: bool = False,
    ) -> list[str]:
        """Embed with the chunk encoder and store; each chunk goes after its document's chunks;
        ``replace``: a chunk whose id is stored replaces it (else that id is refused)."""
        ...

    def delete(self, ids: Sequence[str]) -> int:
        """Remove chunks by chunk id, and every chunk of a document by its document id;
        returns how many chunks were removed."""
        ...

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks of the given ids (unknown ids skipped)."""
        ...

    def search(
        self, queries: list[str], k: int, stop_threshold: float | None, filter: Any
    ) -> list[list[Hit]]:
        """Multi-step search of several questions (as :meth:`MultiStepSearcher.search`)."""
        ...


class IndexCorpus:
    """Chunks in an in-memory :class:`~qrag_integrations.core.index.ChunkIndex`, searched exactly
    (or with FAISS pre-selection, per ``settings``) by ``policy`` (``None``: the checkpoint's)."""

    def __init__(
        self,
        model: QRAGModel,
        index: ChunkIndex,
        settings: SearchSettings | None = None,
        policy: SearchPolicy | None = None,
    ) -> None:
        self.model, self.index = model, index
        self.reconfigure(settings, policy)

    def reconfigure(self, settings: SearchSettings | None, policy: SearchPolicy | None) -> None:
        """Search by ``policy``, as fast as ``settings`` say, from the next search on."""
        self.searcher = MultiStepSearcher(self.model, self.index, settings, policy)
        self.policy = self.searcher.policy

    def __len__(self) -> int:
        return len(self.index)

    def add(
        self,
        texts: list[str],
        metadatas: Sequence[dict[str, Any]] | None,
        ids: Sequence[str] | None,
        doc_ids: list[str],
        batch_size: int,
        show_progress: bool,
        replace: bool = False,
    ) -> list[str]:
        for i, text in enumerate(texts):
            validation.check_unicode(text, f"text {i}")
        ids = None if ids is None else validation.check_chunk_ids(ids)
        # fail before the costly embedding
        self.index.check_new(len(texts), metadatas, None if replace else ids)
        emb = self.model.embed_chunks(texts, batch_size=batch_size, show_progress=show_progress)
        # orders=None: each chunk goes after the chunks its document already has in the index
        return self.index.add(
            texts, emb, metadatas=metadatas, ids=ids, doc_ids=doc_ids, replace=replace
        )

    def delete(self, ids: Sequence[str]) -> int:
        ids = validation.as_ids(ids)
        return self.index.delete(ids + self.index.chunks_of_documents(ids))

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        return self.index.get(ids)

    def search(
        self, queries: list[str], k: int, stop_threshold: float | None, filter: Any
    ) -> list[list[Hit]]:
        return self.searcher.search(queries, k=k, stop_threshold=stop_threshold, filter=filter)
