"""``QRAGRetriever``: one object that is a LangChain retriever and a LlamaIndex retriever.

A thin layer over the framework-free core (:mod:`~qrag_integrations.core.model`,
:mod:`~qrag_integrations.core.index`, :mod:`~qrag_integrations.core.search`): this module holds the
settings, the constructors, the corpus and the one :meth:`QRAGRetriever.search`; what each
framework calls is in :mod:`~qrag_integrations.frameworks.retriever_bases`, conversion between framework objects and
chunks in :mod:`~qrag_integrations.frameworks.conversion`, save / load in
:mod:`~qrag_integrations.core.persistence`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.documents import Document as LCDocument
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import BaseNode
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from qrag_integrations.core import validation
from qrag_integrations.core.loading import load_model
from qrag_integrations.frameworks.conversion import (
    chunk_to_langchain,
    documents_to_chunks,
    llama_index_nodes,
    vector_store_documents,
)
from qrag_integrations.core.defaults import default_checkpoint
from qrag_integrations.core.errors import IndexMismatchError, QRAGError, UnknownOptionError
from qrag_integrations.frameworks.retriever_bases import LangChainFace, LlamaIndexFace
from qrag_integrations.core.index import INDEX_DTYPES, ChunkIndex, MetadataFilter
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.options import check_options
from qrag_integrations.core.persistence import SETTINGS_FILE, read_retriever, save_retriever
from qrag_integrations.core.search import Hit, MultiStepSearcher, SearchSettings

#: Fields of the LangChain / LlamaIndex base classes that a save does not keep.
_NOT_SAVED = frozenset({"callback_manager", "object_map", "callbacks", "tags", "metadata"})


class QRAGRetriever(LangChainFace, LlamaIndexFace):
    """Q-RAG learned multi-step retriever for LangChain *and* LlamaIndex.

    Each of up to ``k`` steps encodes the question plus the chunks found so far and picks the
    chunk with the highest learned Q-value, so later picks depend on earlier ones (multi-hop).

    Setup:
        ``pip install qrag-integrations`` (see README: install the pinned torch first).

    Instantiate:
        .. code-block:: python

            from qrag_integrations import QRAGRetriever

            retriever = QRAGRetriever.from_texts(texts, checkpoint="path/to/checkpoint", k=3)

    Usage:
        .. code-block:: python

            docs = retriever.invoke("Where is the football?")       # LangChain
            nodes = retriever.retrieve("Where is the football?")    # LlamaIndex
            docs[0].metadata["qrag_step"], docs[0].metadata["qrag_q_value"]

    Use within a chain:
        .. code-block:: python

            chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
            engine = RetrieverQueryEngine.from_args(retriever, llm=llm)   # the same object

    ``get_prompts`` follows LlamaIndex (a dict; a retriever has no prompts).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    k: int = 4
    """Number of search steps = documents returned (fewer if ``stop_threshold`` stops early or
    the index has fewer chunks). Override per call with ``invoke(q, k=2)``."""
    stop_threshold: float | None = None
    """Stop before a pick whose Q-value is below this (the paper evaluates with 0.5 on trained
    models); ``None`` always takes ``k`` steps."""
    filter: dict[str, Any] | None = None
    """Default metadata filter ``{"key": value or [values]}``; override per call with ``filter=``."""
    checkpoint: str | None = None
    """Checkpoint folder or HF encoder name the model was loaded from (``None``: default model)."""
    device: str = "cpu"
    """Device of the model and embeddings: ``"cpu"``, ``"cuda"``, ``"cuda:1"``..."""
    index_dtype: str = "float32"
    """Storage dtype of chunk embeddings: ``float32``, ``float16`` or ``bfloat16`` (half the memory)."""
    batch_size: int = Field(default=64, ge=1)
    """Chunks per encoder batch when embedding."""
    show_progress: bool = False
    """Show a progress bar while embedding chunks."""
    faiss_candidates: int | None = None
    """Approximate mode for very large indexes: FAISS pre-selects this many candidates per step."""

    # LlamaIndex's BaseRetriever.__init__ (its public constructor, called below) sets these;
    # pydantic needs them declared.
    callback_manager: Any = Field(default=None, exclude=True)
    object_map: dict = Field(default_factory=dict, exclude=True)
    _verbose: bool = PrivateAttr(default=False)

    #: Keyword arguments of ``__init__`` that a ``from_*`` constructor passes on beside the fields.
    _init_keywords: ClassVar[frozenset[str]] = frozenset({"model", "index", "callback_manager"})

    _model: QRAGModel = PrivateAttr()
    _index: ChunkIndex = PrivateAttr()
    _searcher: MultiStepSearcher = PrivateAttr()

    def __init__(
        self, *, texts: Sequence[str] | None = None, metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None, model: QRAGModel | None = None, index: ChunkIndex | None = None,
        callback_manager: Any = None, **data: Any,
    ) -> None:
        """Build a retriever; prefer the ``from_*`` constructors.

        Args:
            texts: optional chunk texts to index right away (each its own document).
            metadatas: metadata per text.
            ids: ids per text.
            model: an already loaded model (else loaded from ``checkpoint``).
            index: an existing index built with this model.
            callback_manager: LlamaIndex callback manager.
            **data: the fields (``k``, ``checkpoint``, ``device``, ...); no other name.
        """
        check_options(data, type(self).model_fields, f"{type(self).__name__}()")
        if "k" in data:
            validation.check_k(data["k"])  # before pydantic, which would coerce "3", True or 2.0 to an int
        super().__init__(**data)
        LIBaseRetriever.__init__(self, callback_manager=callback_manager)
        if self.index_dtype not in INDEX_DTYPES:
            raise QRAGError(f"index_dtype must be one of {sorted(INDEX_DTYPES)}, got {self.index_dtype!r}")
        if model is None:
            if self.checkpoint is None:
                self.checkpoint = default_checkpoint()
            model = load_model(self.checkpoint, device=self.device)
        self._model = model.eval()
        if index is None:
            index = ChunkIndex(model.embedding_dim, dtype=INDEX_DTYPES[self.index_dtype], device=self.device)
        elif index.embedding_dim != model.embedding_dim:
            raise IndexMismatchError(
                f"index embedding size {index.embedding_dim} != model embedding size {model.embedding_dim}"
            )
        self._index = index
        self._searcher = MultiStepSearcher(model, index, SearchSettings(faiss_candidates=self.faiss_candidates))
        if texts is not None:
            self.add_texts(texts, metadatas=metadatas, ids=ids)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_texts(
        cls, texts: Sequence[str], metadatas: Sequence[dict[str, Any]] | None = None, ids: Sequence[str] | None = None,
        checkpoint: str | None = None, k: int = 4, **kwargs: Any,
    ) -> QRAGRetriever:
        """Index raw texts, each one chunk of one shared document in the given order.

        Args:
            texts: chunk texts (their order is the document order positions use).
            metadatas: metadata per text.
            ids: ids per text (default random).
            checkpoint: checkpoint folder or HF encoder name; default: the packaged model.
            k: default number of steps.
            **kwargs: other fields (``device``, ``stop_threshold``, ...); no other name.
        """
        cls._refuse_unknown(kwargs, "from_texts", "metadatas", "ids")
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_texts(texts, metadatas=metadatas, ids=ids)
        return retriever

    @classmethod
    def from_documents(
        cls, documents: Sequence[Any], checkpoint: str | None = None, k: int = 4, text_splitter: Any = None, **kwargs: Any
    ) -> QRAGRetriever:
        """Index LangChain ``Document``\\ s or LlamaIndex ``Document``/nodes.

        Args:
            documents: LangChain Documents or LlamaIndex Documents / nodes.
            checkpoint: checkpoint folder or HF encoder name; default: the packaged model.
            k: default number of steps.
            text_splitter: optional LangChain ``TextSplitter`` or LlamaIndex ``NodeParser``;
                each document's pieces keep their order inside that document.
            **kwargs: other fields.
        """
        cls._refuse_unknown(kwargs, "from_documents", "text_splitter")
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_documents(documents, text_splitter=text_splitter)
        return retriever

    @classmethod
    def from_nodes(
        cls, nodes: Sequence[BaseNode], checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> QRAGRetriever:
        """Index LlamaIndex nodes (ids, metadata and source document are kept)."""
        cls._refuse_unknown(kwargs, "from_nodes", "text_splitter")
        return cls.from_documents(list(nodes), checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def from_llama_index(
        cls, index: Any, checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> QRAGRetriever:
        """Re-index the nodes of an existing LlamaIndex index (e.g. a ``VectorStoreIndex``).

        The nodes come from its docstore; chunk embeddings are recomputed with the Q-RAG chunk
        encoder (the vector store's own embeddings belong to another model).
        """
        cls._refuse_unknown(kwargs, "from_llama_index", "text_splitter")
        return cls.from_nodes(llama_index_nodes(index), checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def from_vector_store(
        cls, vector_store: Any, ids: Sequence[str] | None = None, checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> QRAGRetriever:
        """Re-index the documents of a LangChain vector store.

        Args:
            vector_store: a LangChain ``VectorStore``; with ``ids``, read through
                ``get_by_ids``; without, the store must expose its documents (``InMemoryVectorStore``).
            ids: which documents to take.
            checkpoint: checkpoint folder or HF encoder name.
            k: default number of steps.
            **kwargs: other fields.
        """
        cls._refuse_unknown(kwargs, "from_vector_store", "ids")
        docs = vector_store_documents(vector_store, ids)
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_documents(docs, as_chunks=True)
        return retriever

    @classmethod
    def from_store(cls, store: Any, checkpoint: str | None = None, k: int = 4, **kwargs: Any) -> QRAGRetriever:
        """Search a vector store in place, nothing copied (stores, ``collection_name``,
        ``candidates_per_step``: :class:`~qrag_integrations.frameworks.store_retriever.QRAGStoreRetriever`)."""
        from qrag_integrations.frameworks.store_retriever import QRAGStoreRetriever

        QRAGStoreRetriever._refuse_unknown(kwargs, "from_store")
        return QRAGStoreRetriever(store=store, checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def _refuse_unknown(cls, options: Iterable[str], method: str, *also: str) -> None:
        """Raise :class:`~qrag_integrations.core.errors.UnknownOptionError` for ``options`` that
        ``cls.method`` would pass on but that ``cls(...)`` does not take."""
        check_options(options, {*cls.model_fields, *cls._init_keywords, *also}, f"{cls.__name__}.{method}")

    # -- corpus management ----------------------------------------------------------------------
    @property
    def model(self) -> QRAGModel:
        """The Q-RAG model."""
        return self._model

    @property
    def index(self) -> ChunkIndex:
        """The chunk index."""
        return self._index

    def __len__(self) -> int:
        return len(self._index)

    def add_texts(
        self, texts: Sequence[str], metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None, doc_id: str | None = None,
    ) -> list[str]:
        """Embed and add chunks; only these chunks are embedded. Returns their ids."""
        texts = validation.check_texts(texts)
        return self._add(texts, metadatas, ids, [doc_id or "texts"] * len(texts))

    def add_documents(
        self, documents: Sequence[Any], ids: Sequence[str] | None = None, text_splitter: Any = None,
        as_chunks: bool = False, **kwargs: Any,
    ) -> list[str]:
        """Embed and add LangChain Documents or LlamaIndex Documents / nodes.

        Without a splitter each LangChain document becomes one chunk of a shared document (in
        the given order), and each LlamaIndex node one chunk of its source document.

        Args:
            documents: the documents.
            ids: chunk ids (only without a splitter; default: the documents' ids or random).
            text_splitter: LangChain ``TextSplitter`` or LlamaIndex ``NodeParser``.
            as_chunks: treat each document as one chunk even if a splitter is set.
            **kwargs: none is taken (a LangChain ``VectorStore``-style signature): any name raises
                :class:`~qrag_integrations.core.errors.UnknownOptionError`.

        Returns:
            The ids of the added chunks.
        """
        check_options(kwargs, ("ids", "text_splitter", "as_chunks"), f"{type(self).__name__}.add_documents")
        rows = documents_to_chunks(list(documents), None if as_chunks else text_splitter)
        if ids is not None:
            if text_splitter is not None and not as_chunks:
                raise QRAGError("ids= cannot be combined with a text splitter (chunk count unknown)")
            rows.ids = validation.as_ids(ids)
        return self._add(rows.texts, rows.metadatas, rows.ids, rows.doc_ids)

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> list[str]:
        """LlamaIndex-style alias of :meth:`add_documents` for nodes."""
        return self.add_documents(list(nodes))

    def delete(self, ids: Sequence[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id (no re-embedding). Returns ``True`` if any was removed; ``kwargs``:
        none is taken (any name raises :class:`~qrag_integrations.core.errors.UnknownOptionError`)."""
        check_options(kwargs, ("ids",), f"{type(self).__name__}.delete")
        if ids is None:
            raise QRAGError("delete needs ids=[...]")
        if isinstance(ids, str):
            ids = [ids]
        return self._index.delete(validation.as_ids(ids)) > 0

    def get_by_ids(self, ids: Sequence[str]) -> list[LCDocument]:
        """Documents of the given chunk ids (unknown ids skipped)."""
        return [chunk_to_langchain(c) for c in self._index.get(ids)]

    def _add(
        self,
        texts: list[str],
        metas: Sequence[dict[str, Any]] | None,
        ids: Sequence[str] | None,
        doc_ids: list[str],
    ) -> list[str]:
        for i, text in enumerate(texts):
            validation.check_unicode(text, f"text {i}")
        ids = None if ids is None else validation.check_chunk_ids(ids)
        self._index.check_new(len(texts), metas, ids)  # fail before the costly embedding
        emb = self._model.embed_chunks(texts, batch_size=self.batch_size, show_progress=self.show_progress)
        # orders=None: each chunk goes after the chunks its document already has in the index
        return self._index.add(texts, emb, metadatas=metas, ids=ids, doc_ids=doc_ids)

    # -- searching ------------------------------------------------------------------------------
    def search(
        self,
        queries: Sequence[str],
        k: int | None = None,
        filter: MetadataFilter | None = None,
        stop_threshold: float | None = None,
    ) -> list[list[Hit]]:
        """Search several questions in one pass (framework-free: core :class:`Hit` results).

        Args:
            queries: the questions.
            k: steps (= most hits) per question; default the ``k`` field.
            filter: metadata filter; default the ``filter`` field.
            stop_threshold: stop before a pick whose Q-value is below it; default the field.

        Returns:
            Each question's hits in pick order.
        """
        for q in queries:
            validation.check_query(q)
        k = self.k if k is None else k
        validation.check_k(k)
        stop_threshold = self.stop_threshold if stop_threshold is None else stop_threshold
        validation.check_stop_threshold(stop_threshold)
        return self._run_search(list(queries), k, stop_threshold, self.filter if filter is None else filter)

    def _run_search(self, queries: list[str], k: int, stop_threshold: float | None, filter: Any) -> list[list[Hit]]:
        return self._searcher.search(queries, k=k, stop_threshold=stop_threshold, filter=filter)

    def get_prompts(self) -> dict[str, Any]:  # type: ignore[override]
        """LlamaIndex's (empty) prompt dict: both frameworks define ``get_prompts``."""
        return LIBaseRetriever.get_prompts(self)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Write settings, index and (unless it is a named installed model) the model, atomically.

        A model loaded from a local checkpoint folder is copied in, so the saved folder is
        self-contained; a packaged or hub model is stored by name (layout:
        :mod:`qrag_integrations.core.persistence`).

        Args:
            path: destination folder: missing, empty, or an earlier saved retriever (replaced whole).
            overwrite: move anything else at ``path`` (a file, a folder of other files) aside to a
                sibling ``<name>.old-<time>`` instead of refusing; nothing is deleted.

        Raises:
            QRAGError: ``path`` is a file or a folder that is not a saved retriever (naming what
                is there) and ``overwrite`` is false; or a setting or chunk metadata is not JSON.
        """
        settings = self.model_dump(exclude=set(_NOT_SAVED))
        save_retriever(path, settings, self._model, self._index, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | None = None) -> QRAGRetriever:
        """Load a retriever written by :meth:`save` (every setting kept; no pickle).

        Args:
            path: the saved folder.
            device: load onto this device instead of the saved one.

        Raises:
            QRAGError: missing or corrupt files.
            IndexMismatchError: the index was built with another chunk encoder.
        """
        saved = read_retriever(path, device=device)
        try:
            return cls(model=saved.model, index=saved.index, **saved.settings)
        except (ValidationError, UnknownOptionError) as exc:
            raise QRAGError(f"corrupt {Path(path) / SETTINGS_FILE}: {exc}") from exc
