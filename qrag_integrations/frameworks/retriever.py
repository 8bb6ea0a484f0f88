"""``QRAGRetriever``: one object that is a LangChain retriever and a LlamaIndex retriever.

A thin layer over the framework-free core (:mod:`~qrag_integrations.core.model`,
:mod:`~qrag_integrations.core.index`, :mod:`~qrag_integrations.core.search`): this module holds the
settings, the constructors and the one :meth:`QRAGRetriever.search`; the chunks live in a
:class:`~qrag_integrations.core.corpus.Corpus` (an in-memory index, or a vector store searched in
place: :class:`~qrag_integrations.stores.corpus.StoreCorpus`); what each
framework calls is in :mod:`~qrag_integrations.frameworks.retriever_bases`, conversion between
framework objects and chunks in :mod:`~qrag_integrations.frameworks.conversion`, save / load in :mod:`~qrag_integrations.core.persistence`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.documents import Document as LCDocument
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import BaseNode
from pydantic import ConfigDict, Field, PrivateAttr

from qrag_integrations.core import validation
from qrag_integrations.core.chunks import MetadataFilter
from qrag_integrations.core.corpus import Corpus, IndexCorpus
from qrag_integrations.core.defaults import default_checkpoint
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.index_files import INDEX_DTYPES
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.persistence import save_retriever
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import Hit, SearchSettings
from qrag_integrations.core.validation import check_options
from qrag_integrations.frameworks.constructors import (
    RULE_FIELDS,
    SCAN_FIELDS,
    SPEED_FIELDS,
    STORE_FIELDS,
    RetrieverConstructors,
    check_assignment,
    check_before_coercion,
    check_store_options,
)
from qrag_integrations.frameworks.conversion import (
    DOCUMENT_KEY,
    as_filter,
    chunk_identities,
    chunk_to_langchain,
    document_of,
    documents_to_chunks,
)
from qrag_integrations.frameworks.retriever_bases import LangChainFace, LlamaIndexFace
from qrag_integrations.stores.corpus import StoreCorpus, open_store
from qrag_integrations.stores.search import StoreStats

#: Adds of more chunks than this show their progress (``show_progress=None``).
PROGRESS_FROM = 1000

#: Fields of the LangChain / LlamaIndex base classes that a save does not keep.
_NOT_SAVED = frozenset({"callback_manager", "object_map", "callbacks", "tags", "metadata"})


class QRAGRetriever(RetrieverConstructors, LangChainFace, LlamaIndexFace):
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

    # validate_assignment: a field set on a built retriever is checked as the constructor checks
    # it (and then takes effect: __setattr__)
    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    k: int = 4
    """Number of search steps = documents returned (fewer if ``stop_threshold`` stops early or
    the index has fewer chunks). Override per call with ``invoke(q, k=2)``."""
    stop_threshold: float | None = None
    """Stop before a pick whose Q-value is below this (``None``: always ``k`` steps)."""
    filter: Any = None
    """Default metadata filter (a dict of the filter language, LlamaIndex ``MetadataFilters``);
    override per call with ``filter=``."""
    checkpoint: str | None = None
    """Checkpoint folder or HF encoder name the model was loaded from (``None``: default model)."""
    device: str = "cpu"
    """Device of the model and embeddings: ``"cpu"``, ``"cuda"``, ``"cuda:1"``..."""
    index_dtype: str = "float32"
    """Storage dtype of chunk embeddings: ``float32``, ``float16`` or ``bfloat16`` (half the memory)."""
    document_key: str | None = DOCUMENT_KEY
    """Metadata key naming a chunk's document (``None``: none); chunks with no document are each
    their own."""
    batch_size: int = Field(default=64, ge=1)
    """Chunks per encoder batch when embedding."""
    show_progress: bool | None = None
    """Progress while embedding (a bar on a terminal or in a notebook, else a log line every 5 s);
    ``None``: on for adds of over 1,000 chunks; ``False`` silences it."""
    faiss_candidates: int | None = None
    """Approximate mode for very large indexes: FAISS pre-selects this many candidates per step."""
    scan: str = "exact"
    """``"exact"``, or scan a compact ``"int8"`` / ``"binary"`` / ``"bf16"`` copy, re-score exactly."""
    rescore: int = Field(default=400, ge=1)
    """Compact ``scan``: candidates re-scored exactly per step (see ``docs/retriever.md``)."""
    lexical_depth: int | None = Field(default=None, ge=0)
    """BM25 fusion depth in the model's lexical_steps (N by Q, N by BM25); None: model's; 0: off."""
    lexical_steps: int | None = Field(default=None, ge=1)
    """First steps that fuse BM25 when fusion is on; None: the model's own (every step if unset)."""
    lexical_gap: float | None = Field(default=None, ge=0)
    """Later steps fuse BM25 where Q's two best lie within this gap; None: the model's; 0: never."""
    lexical_weight: float | None = Field(default=None, ge=0)
    """Fuse BM25 by score, Q + weight * BM25 / the best BM25; None: the model's; 0: by rank."""
    supersede: bool | None = None
    """Later restatements supersede picks (``core.rules``); None: the model's; False: off."""
    candidates_per_step: int = Field(default=64, ge=1)
    """Store-backed only (:meth:`from_store`): chunks asked from the store per step and re-scored
    exactly (the search is exact whenever they hold the exact arg-max)."""
    backend: str = "torch"
    """Encoder runtime: ``"torch"``, ``"onnx"`` or ``"openvino"`` (CPU; extras of those names)."""
    quantize: str | None = None
    """``None`` (float32), ``"int8"`` (``onnx`` weights) or ``"bf16"`` (``torch``, ``openvino``)."""
    threads: int | None = None
    """Threads of a search (torch, ONNX, OpenVINO, FAISS); None: 1 below 8 questions, else torch's."""
    check_exact: bool = False
    """Store-backed only: also score every matching chunk each step to count in :attr:`stats` how
    often the exact arg-max was among the candidates (costly: for evaluation)."""

    # LlamaIndex's BaseRetriever.__init__ (its public constructor, called below) sets these;
    # pydantic needs them declared.
    callback_manager: Any = Field(default=None, exclude=True)
    object_map: dict = Field(default_factory=dict, exclude=True)
    _verbose: bool = PrivateAttr(default=False)

    #: Keyword arguments of ``__init__`` that a ``from_*`` constructor passes on beside the fields.
    _init_keywords: ClassVar[frozenset[str]] = frozenset(
        {"model", "index", "callback_manager", "store", "collection_name", "rank_by"}
    )
    _STORE_FIELDS: ClassVar[frozenset[str]] = STORE_FIELDS

    _model: QRAGModel = PrivateAttr()
    _corpus: Corpus = PrivateAttr()
    _built: bool = PrivateAttr(default=False)

    def __init__(
        self,
        *,
        texts: Sequence[str] | None = None,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        model: QRAGModel | None = None,
        index: ChunkIndex | None = None,
        callback_manager: Any = None,
        store: Any = None,
        collection_name: str | None = None,
        rank_by: str = "auto",
        **data: Any,
    ) -> None:
        """Build a retriever; prefer the ``from_*`` constructors.

        Args:
            texts: optional chunk texts to index right away (as :meth:`add_texts`).
            metadatas: metadata per text.
            ids: ids per text.
            model: an already loaded model (else loaded from ``checkpoint``).
            index: an existing index built with this model.
            callback_manager: LlamaIndex callback manager.
            store: search this vector store in place instead of an in-memory index (see
                :func:`~qrag_integrations.stores.corpus.open_store` for the kinds).
            collection_name: the Qdrant collection when ``store`` is a ``QdrantClient``.
            rank_by: Qdrant only: see :class:`~qrag_integrations.stores.qdrant.QdrantSource`.
            **data: the fields (``k``, ``checkpoint``, ``device``, ...); no other name.
        """
        check_options(data, type(self).model_fields, f"{type(self).__name__}()")
        check_store_options(
            data,
            store is not None,
            index is not None or texts is not None,
            collection_name,
            rank_by,
        )
        check_before_coercion(data)
        super().__init__(**data)
        LIBaseRetriever.__init__(self, callback_manager=callback_manager)
        if self.index_dtype not in INDEX_DTYPES:
            raise QRAGError(
                f"index_dtype must be one of {sorted(INDEX_DTYPES)}, got {self.index_dtype!r}"
            )
        validation.check_device(self.device)
        as_filter(self.filter)  # a bad default filter is refused here, not at the first search
        if model is None:
            if self.checkpoint is None:
                self.checkpoint = default_checkpoint()
            model = load_model(self.checkpoint, device=self.device)
        self._model = model.eval()
        if self.backend != "torch" or self.quantize is not None:
            model.set_backend(self.backend, self.quantize)
        policy = self._policy()
        if store is not None:
            source = open_store(store, model, collection_name, rank_by, self.document_key)
            self._corpus = StoreCorpus(
                model, source, self.candidates_per_step, self.check_exact, policy, self.threads
            )
            self._built = True
            return
        if index is None:
            index = ChunkIndex(
                model.embedding_dim, dtype=INDEX_DTYPES[self.index_dtype], device=self.device
            )
        elif index.embedding_dim != model.embedding_dim:
            raise IndexMismatchError(
                f"index embedding size {index.embedding_dim} != model embedding size {model.embedding_dim}"
            )
        self._corpus = IndexCorpus(model, index, self._settings(), policy)
        self._built = True
        if texts is not None:
            self.add_texts(texts, metadatas=metadatas, ids=ids)

    def _policy(self) -> SearchPolicy:
        """The checkpoint's policy with this retriever's rule fields: the same on every path."""
        return SearchPolicy.of(
            self._model.config, **{name: getattr(self, name) for name in RULE_FIELDS}
        )

    def _settings(self) -> SearchSettings:
        """How fast the in-memory index is searched (its scan fields and threads)."""
        return SearchSettings(
            threads=self.threads, **{name: getattr(self, name) for name in SCAN_FIELDS}
        )

    def __setattr__(self, name: str, value: Any) -> None:
        """A field set on a built retriever takes effect, or raises naming why it cannot (its
        model and index hold it, or the other kind of retriever uses it); a value the
        constructor would refuse is refused, and the retriever is left as it was."""
        if name not in type(self).model_fields or not self._built:
            super().__setattr__(name, value)
            return
        check_assignment(name, value, self.is_store_backed)
        before = getattr(self, name)
        super().__setattr__(name, value)
        try:
            self._take_effect(name)
        except BaseException:
            super().__setattr__(name, before)
            raise

    def _take_effect(self, name: str) -> None:
        """Apply field ``name``'s new value: the search rules and speed set the search up again,
        the backend re-encodes; the rest (``k``, ``filter``, ``batch_size``, ...) is read where it
        is used."""
        if name in RULE_FIELDS or name in SPEED_FIELDS:
            if isinstance(self._corpus, StoreCorpus):
                self._corpus.reconfigure(
                    self.candidates_per_step, self.check_exact, self._policy(), self.threads
                )
            else:
                self._corpus.reconfigure(self._settings(), self._policy())
        elif name in ("backend", "quantize"):
            self._model.set_backend(self.backend, self.quantize)
        elif name == "filter":
            as_filter(self.filter)

    @classmethod
    def _refuse_unknown(cls, options: Iterable[str], method: str, *also: str) -> None:
        """Raise :class:`~qrag_integrations.core.errors.UnknownOptionError` for ``options`` that
        ``cls.method`` would pass on but that ``cls(...)`` does not take."""
        check_options(
            options, {*cls.model_fields, *cls._init_keywords, *also}, f"{cls.__name__}.{method}"
        )

    # -- corpus management ----------------------------------------------------------------------
    @property
    def model(self) -> QRAGModel:
        """The Q-RAG model."""
        return self._model

    @property
    def policy(self) -> SearchPolicy:
        """The search policy in use: the checkpoint's, with this retriever's ``lexical_*`` and
        ``supersede`` fields (``print(retriever.policy.describe())`` lists its rules)."""
        return self._corpus.policy

    @property
    def corpus(self) -> Corpus:
        """Where the chunks live: an in-memory index or a vector store."""
        return self._corpus

    @property
    def is_store_backed(self) -> bool:
        """Whether the chunks live in a vector store (:meth:`from_store`)."""
        return isinstance(self._corpus, StoreCorpus)

    @property
    def index(self) -> ChunkIndex:
        """The in-memory chunk index (a store-backed retriever has none: its chunks are in
        :attr:`source`)."""
        if not isinstance(self._corpus, IndexCorpus):
            raise QRAGError(
                "a store-backed retriever has no in-memory index; its chunks are in .source"
            )
        return self._corpus.index

    @property
    def source(self) -> Any:
        """The store-backed search source (store-backed retrievers only)."""
        if not isinstance(self._corpus, StoreCorpus):
            raise QRAGError("an in-memory retriever has no store source; its chunks are in .index")
        return self._corpus.source

    @property
    def stats(self) -> StoreStats:
        """Store-backed only: counters of the searches so far (steps, candidates, exact arg-max found)."""
        if not isinstance(self._corpus, StoreCorpus):
            raise QRAGError(
                "stats count store-backed searches; this retriever searches an in-memory index"
            )
        return self._corpus.stats

    def __len__(self) -> int:
        return len(self._corpus)

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        doc_id: str | None = None,
    ) -> list[str]:
        """Embed and add chunks; only these chunks are embedded. Returns their ids.

        Args:
            texts: chunk texts.
            metadatas: metadata per text.
            ids: ids per text (default: derived from document, text and metadata, so adding the
                same chunk again replaces it).
            doc_id: the document all these texts form, in this order (a story, a log). Without
                it a text's document is ``metadata[document_key]`` where set, else the text is its
                own document; documents are ordered by id, so the order texts come in never
                changes a pick.
        """
        texts = validation.check_texts(texts)
        validation.check_metadatas(metadatas)
        validation.check_optional_str(doc_id, "doc_id")
        metas = metadatas if metadatas is not None and len(metadatas) == len(texts) else None
        # (a wrong length is refused with the other checks of the add)
        if metas is not None and all(isinstance(m, Mapping) or m is None for m in metas):
            groups = [doc_id or document_of(m or {}, self.document_key, None) for m in metas]
        else:
            groups = [doc_id] * len(texts)
        given = None if ids is None else validation.as_ids(ids)
        chunk_ids, doc_ids = chunk_identities(texts, groups, metas, given)
        # given ids as they are: a wrong count or an empty id is refused by the add's checks
        chunk_ids = chunk_ids if given is None else given
        return self._add(texts, metadatas, chunk_ids, doc_ids, replace=ids is None)

    def add_documents(
        self,
        documents: Sequence[Any],
        ids: Sequence[str] | None = None,
        text_splitter: Any = None,
        as_chunks: bool = False,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and add LangChain Documents or LlamaIndex Documents / nodes.

        Without a splitter each LangChain document becomes one chunk of the document its
        ``metadata[document_key]`` names, else its own document; each LlamaIndex node one chunk
        of its source document (``ref_doc_id``). With one, each document's pieces are chunks of
        that document (its ``metadata[document_key]``, else its id), in order. Documents are
        ordered by id, so the order documents come in never changes a pick.

        Args:
            documents: the documents.
            ids: chunk ids (only without a splitter; default: the documents' ids, else derived
                from document, text and metadata, so adding the same chunk again replaces it).
            text_splitter: LangChain ``TextSplitter`` or LlamaIndex ``NodeParser``.
            as_chunks: treat each document as one chunk even if a splitter is set.
            **kwargs: none is taken (a LangChain ``VectorStore``-style signature): any name raises
                :class:`~qrag_integrations.core.errors.UnknownOptionError`.

        Returns:
            The ids of the added chunks.
        """
        check_options(
            kwargs, ("ids", "text_splitter", "as_chunks"), f"{type(self).__name__}.add_documents"
        )
        rows = documents_to_chunks(
            documents, None if as_chunks else text_splitter, self.document_key
        )
        given = rows.given_ids
        if ids is not None:
            if text_splitter is not None and not as_chunks:
                raise QRAGError(
                    "ids= cannot be combined with a text splitter (chunk count unknown)"
                )
            rows.ids, given = validation.as_ids(ids), True
        return self._add(rows.texts, rows.metadatas, rows.ids, rows.doc_ids, replace=not given)

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> list[str]:
        """LlamaIndex-style alias of :meth:`add_documents` for nodes."""
        return self.add_documents(list(nodes))

    def delete(self, ids: Sequence[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by chunk id, and every chunk of a document by its document id (no
        re-embedding). Returns ``True`` if any was removed; ``kwargs``: none is taken (any name
        raises :class:`~qrag_integrations.core.errors.UnknownOptionError`)."""
        check_options(kwargs, ("ids",), f"{type(self).__name__}.delete")
        if ids is None:
            raise QRAGError("delete needs ids=[...]")
        return self._corpus.delete([ids] if isinstance(ids, str) else ids) > 0

    def delete_ref_doc(self, ref_doc_id: str, **kwargs: Any) -> None:
        """LlamaIndex-style: delete every chunk of the document ``ref_doc_id``; ``kwargs``
        (LlamaIndex's ``delete_from_docstore``) are accepted and ignored: the chunks are ours."""
        self.delete([ref_doc_id])

    def get_by_ids(self, ids: Sequence[str]) -> list[LCDocument]:
        """Documents of the given chunk ids (unknown ids skipped)."""
        return [chunk_to_langchain(c) for c in self._corpus.get(validation.as_ids(ids))]

    def _add(
        self,
        texts: list[str],
        metas: Sequence[dict[str, Any]] | None,
        ids: Sequence[str] | None,
        doc_ids: list[str],
        replace: bool = False,
    ) -> list[str]:
        progress = self.show_progress
        if progress is None:
            progress = len(texts) > PROGRESS_FROM
        return self._corpus.add(
            texts, metas, ids, doc_ids, self.batch_size, progress, replace=replace
        )

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
        queries = validation.check_queries(queries)
        k = self.k if k is None else k
        validation.check_k(k)
        stop_threshold = self.stop_threshold if stop_threshold is None else stop_threshold
        validation.check_stop_threshold(stop_threshold)
        return self._run_search(
            list(queries), k, stop_threshold, as_filter(self.filter if filter is None else filter)
        )

    def _run_search(
        self, queries: list[str], k: int, stop_threshold: float | None, filter: Any
    ) -> list[list[Hit]]:
        return self._corpus.search(queries, k, stop_threshold, filter)

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
                is there) and ``overwrite`` is false; or a setting or chunk metadata is not JSON;
                or the retriever is store-backed (persist the store instead).
        """
        if not isinstance(self._corpus, IndexCorpus):
            raise QRAGError(
                "a store-backed retriever keeps its chunks in the store: persist the store, then from_store() again"
            )
        settings = self.model_dump(exclude=set(_NOT_SAVED) | self._STORE_FIELDS)
        save_retriever(path, settings, self._model, self._corpus.index, overwrite=overwrite)
