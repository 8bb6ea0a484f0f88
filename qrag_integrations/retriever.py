"""``QRAGRetriever``: one object that is a LangChain retriever and a LlamaIndex retriever.

A thin layer over the framework-free core (:mod:`~qrag_integrations.model`,
:mod:`~qrag_integrations.index`, :mod:`~qrag_integrations.search`).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from qrag_integrations.atomic import SaveKind, atomic_dir
from qrag_integrations.checkpoint import (
    chunk_encoder_fingerprint,
    load_model,
    write_checkpoint_files,
)
from qrag_integrations.defaults import default_checkpoint
from qrag_integrations.errors import IndexMismatchError, QRAGError
from qrag_integrations.index import INDEX_DTYPES, ChunkIndex, MetadataFilter
from qrag_integrations.model import QRAGModel
from qrag_integrations.search import Hit, MultiStepSearcher, SearchSettings

#: ``invoke`` keyword naming the prefetched results of the ``batch`` call it belongs to.
_BATCH_KEY = "qrag_batch"

#: Metadata keys added to every result.
META_STEP, META_Q, META_POSITION, META_SCORE = "qrag_step", "qrag_q_value", "qrag_position", "score"
SETTINGS_FILE, MODEL_DIR, INDEX_DIR = "retriever.json", "model", "index"
RETRIEVER_FORMAT = "qrag-retriever"
#: A saved retriever folder: what :meth:`QRAGRetriever.save` may replace.
RETRIEVER_SAVE = SaveKind(
    "saved QRAGRetriever", frozenset({SETTINGS_FILE, MODEL_DIR, INDEX_DIR}), SETTINGS_FILE, RETRIEVER_FORMAT
)


class QRAGRetriever(LCBaseRetriever, LIBaseRetriever):
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
    """Storage dtype of chunk embeddings: ``float32`` or ``float16`` (half the memory)."""
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

    _model: QRAGModel = PrivateAttr()
    _index: ChunkIndex = PrivateAttr()
    _searcher: MultiStepSearcher = PrivateAttr()
    _prefetched: dict[str, dict[str, list[Hit]]] = PrivateAttr(default_factory=dict)
    """Per running ``batch`` call (keyed by a token passed to ``invoke``): hits by question."""

    def __init__(
        self,
        *,
        texts: Sequence[str] | None = None,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        model: QRAGModel | None = None,
        index: ChunkIndex | None = None,
        callback_manager: Any = None,
        **data: Any,
    ) -> None:
        """Build a retriever; prefer the ``from_*`` constructors.

        Args:
            texts: optional chunk texts to index right away (each its own document).
            metadatas: metadata per text.
            ids: ids per text.
            model: an already loaded model (else loaded from ``checkpoint``).
            index: an existing index built with this model.
            callback_manager: LlamaIndex callback manager.
            **data: the fields (``k``, ``checkpoint``, ``device``, ...).
        """
        if "k" in data:
            _check_k(data["k"])  # before pydantic, which would coerce "3", True or 2.0 to an int
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
        cls,
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        checkpoint: str | None = None,
        k: int = 4,
        **kwargs: Any,
    ) -> QRAGRetriever:
        """Index raw texts, each one chunk of one shared document in the given order.

        Args:
            texts: chunk texts (their order is the document order positions use).
            metadatas: metadata per text.
            ids: ids per text (default random).
            checkpoint: checkpoint folder or HF encoder name; default: the packaged model.
            k: default number of steps.
            **kwargs: other fields (``device``, ``stop_threshold``, ...).
        """
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_texts(texts, metadatas=metadatas, ids=ids)
        return retriever

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Any],
        checkpoint: str | None = None,
        k: int = 4,
        text_splitter: Any = None,
        **kwargs: Any,
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
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_documents(documents, text_splitter=text_splitter)
        return retriever

    @classmethod
    def from_nodes(
        cls, nodes: Sequence[BaseNode], checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> QRAGRetriever:
        """Index LlamaIndex nodes (ids, metadata and source document are kept)."""
        return cls.from_documents(list(nodes), checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def from_llama_index(
        cls, index: Any, checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> QRAGRetriever:
        """Re-index the nodes of an existing LlamaIndex index (e.g. a ``VectorStoreIndex``).

        The nodes come from its docstore; chunk embeddings are recomputed with the Q-RAG chunk
        encoder (the vector store's own embeddings belong to another model).
        """
        nodes = list(index.docstore.docs.values())
        if not nodes:
            raise QRAGError("the LlamaIndex index's docstore holds no nodes (was it built with store_nodes_override?)")
        return cls.from_nodes(nodes, checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def from_vector_store(
        cls,
        vector_store: Any,
        ids: Sequence[str] | None = None,
        checkpoint: str | None = None,
        k: int = 4,
        **kwargs: Any,
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
        if ids is not None:
            docs = list(vector_store.get_by_ids(list(ids)))
        elif isinstance(getattr(vector_store, "store", None), dict):
            docs = [
                LCDocument(id=i, page_content=v["text"], metadata=v.get("metadata", {}))
                for i, v in vector_store.store.items()
            ]
        else:
            raise QRAGError(
                f"{type(vector_store).__name__} cannot list its documents; pass ids= to read them "
                "with get_by_ids"
            )
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_documents(docs, as_chunks=True)
        return retriever

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
        self,
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        doc_id: str | None = None,
    ) -> list[str]:
        """Embed and add chunks; only these chunks are embedded. Returns their ids."""
        if isinstance(texts, str):
            raise QRAGError("texts must be a sequence of strings, not a single string")
        texts = list(texts)
        bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
        if bad:
            raise QRAGError(f"texts must be strings; item {bad[0]} is {type(texts[bad[0]]).__name__}")
        doc_ids = [doc_id or "texts"] * len(texts)
        return self._add(texts, metadatas, ids, doc_ids)

    def add_documents(
        self,
        documents: Sequence[Any],
        ids: Sequence[str] | None = None,
        text_splitter: Any = None,
        as_chunks: bool = False,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and add LangChain Documents or LlamaIndex Documents / nodes.

        Without a splitter each LangChain document becomes one chunk of a shared document (in
        the given order), and each LlamaIndex node one chunk of its source document.

        Args:
            documents: the documents.
            ids: chunk ids (only without a splitter; default: the documents' ids or random).
            text_splitter: LangChain ``TextSplitter`` or LlamaIndex ``NodeParser``.
            as_chunks: treat each document as one chunk even if a splitter is set.
            **kwargs: ignored (LangChain ``VectorStore``-style signature compatibility).

        Returns:
            The ids of the added chunks.
        """
        texts, metas, chunk_ids, doc_ids = _to_chunks(
            list(documents), None if as_chunks else text_splitter
        )
        if ids is not None:
            if text_splitter is not None and not as_chunks:
                raise QRAGError("ids= cannot be combined with a text splitter (chunk count unknown)")
            chunk_ids = _as_ids(ids)
        return self._add(texts, metas, chunk_ids, doc_ids)

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> list[str]:
        """LlamaIndex-style alias of :meth:`add_documents` for nodes."""
        return self.add_documents(list(nodes))

    def delete(self, ids: Sequence[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id (no re-embedding). Returns ``True`` if any was removed."""
        if ids is None:
            raise QRAGError("delete needs ids=[...]")
        if isinstance(ids, str):
            ids = [ids]
        return self._index.delete(_as_ids(ids)) > 0

    def get_by_ids(self, ids: Sequence[str]) -> list[LCDocument]:
        """Documents of the given chunk ids (unknown ids skipped)."""
        return [LCDocument(id=c.id, page_content=c.text, metadata=dict(c.metadata)) for c in self._index.get(ids)]

    def _add(
        self,
        texts: list[str],
        metas: Sequence[dict[str, Any]] | None,
        ids: Sequence[str] | None,
        doc_ids: list[str],
    ) -> list[str]:
        for i, text in enumerate(texts):
            _check_unicode(text, f"text {i}")
        if ids is not None:
            ids = _as_ids(ids)
            if not all(ids):
                raise QRAGError("chunk ids must be non-empty strings")
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
        """Framework-free search of several questions in one pass (core :class:`Hit` results)."""
        for q in queries:
            _check_query(q)
        k = self.k if k is None else k
        _check_k(k)
        stop_threshold = self.stop_threshold if stop_threshold is None else stop_threshold
        _check_stop_threshold(stop_threshold)
        return self._searcher.search(
            list(queries),
            k=k,
            stop_threshold=stop_threshold,
            where=self.filter if filter is None else filter,
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        prefetched = self._prefetched.get(kwargs.pop(_BATCH_KEY, None), {})
        hits = prefetched.get(query) if isinstance(query, str) else None
        if hits is None:
            hits = self.search([query], k=kwargs.get("k"), filter=kwargs.get("filter"),
                               stop_threshold=kwargs.get("stop_threshold"))[0]
        return [_to_lc(h) for h in hits]

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> list[LCDocument]:
        # The search is CPU/GPU work in torch (which releases the GIL): run it in a worker
        # thread so the event loop keeps serving other tasks.
        hits = await asyncio.to_thread(
            self.search, [query], kwargs.get("k"), kwargs.get("filter"), kwargs.get("stop_threshold")
        )
        return [_to_lc(h) for h in hits[0]]

    def batch(
        self,
        inputs: list[str],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Retrieve for several questions in one search pass (one encoder batch per step).

        The search runs once for every valid question; then LangChain's own ``Runnable.batch``
        invokes the retriever per question (callbacks, ``return_exceptions``, concurrency as
        usual), each answered from that pass. A bad question raises (or, with
        ``return_exceptions=True``, yields its exception) without stopping the others.
        """
        token = uuid.uuid4().hex
        self._prefetched[token] = self._prefetch(inputs, kwargs)
        try:
            return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs, **{_BATCH_KEY: token})
        finally:
            self._prefetched.pop(token, None)

    def _prefetch(self, inputs: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, list[Hit]]:
        """Hits of every valid question of a batch, from one search pass (empty if it fails:
        each question then searches, and fails, on its own)."""
        good = []
        for query in dict.fromkeys(q for q in inputs if isinstance(q, str)):
            try:
                _check_query(query)
                good.append(query)
            except QRAGError:
                pass
        if not good:
            return {}
        try:
            hits = self.search(good, k=kwargs.get("k"), filter=kwargs.get("filter"),
                               stop_threshold=kwargs.get("stop_threshold"))
        except Exception:  # noqa: BLE001 - reported by each question's own invoke
            return {}
        return dict(zip(good, hits))

    async def abatch(
        self,
        inputs: list[str],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Async :meth:`batch`, run in a worker thread."""
        return await asyncio.to_thread(
            self.batch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )

    def retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:  # type: ignore[override]
        """LlamaIndex retrieval; a query that is not a string is refused with a QRAGError."""
        if not isinstance(str_or_query_bundle, QueryBundle):
            _check_query(str_or_query_bundle)
        return LIBaseRetriever.retrieve(self, str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:  # type: ignore[override]
        """Async :meth:`retrieve`."""
        if not isinstance(str_or_query_bundle, QueryBundle):
            _check_query(str_or_query_bundle)
        return await LIBaseRetriever.aretrieve(self, str_or_query_bundle)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_to_li(h) for h in self.search([query_bundle.query_str])[0]]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await asyncio.to_thread(self.search, [query_bundle.query_str])
        return [_to_li(h) for h in hits[0]]

    def get_prompts(self) -> dict[str, Any]:  # type: ignore[override]
        """LlamaIndex's prompt dict (empty: a retriever has no prompts)."""
        return LIBaseRetriever.get_prompts(self)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Write settings, index and (unless it is a named installed model) the model, atomically.

        A model loaded from a local checkpoint folder is copied in, so the saved folder is
        self-contained; a packaged or hub model is stored by name.

        Args:
            path: destination folder: missing, empty, or an earlier saved retriever (replaced whole).
            overwrite: move anything else at ``path`` (a file, a folder of other files) aside to a
                sibling ``<name>.old-<time>`` instead of refusing; nothing is deleted.

        Raises:
            QRAGError: ``path`` is a file or a folder that is not a saved retriever (naming what
                is there) and ``overwrite`` is false; or a setting or chunk metadata is not JSON.
        """
        settings = self.model_dump(exclude={"callback_manager", "object_map", "callbacks", "tags", "metadata"})
        embed_model = not _is_named_model(self.checkpoint)
        fingerprint = chunk_encoder_fingerprint(self._model)
        try:
            settings_json = json.dumps({"format": RETRIEVER_FORMAT, "format_version": 1, "settings": settings,
                                        "model_in_folder": embed_model}, indent=2) + "\n"
        except (TypeError, ValueError) as exc:
            raise QRAGError(f"the retriever's settings must be JSON-serialisable to save it: {exc}") from exc
        with atomic_dir(path, RETRIEVER_SAVE, overwrite=overwrite) as tmp:
            if embed_model:
                (tmp / MODEL_DIR).mkdir()
                write_checkpoint_files(self._model, tmp / MODEL_DIR)
            self._index.save(tmp / INDEX_DIR, extra={"chunk_encoder_fingerprint": fingerprint})
            (tmp / SETTINGS_FILE).write_text(settings_json, encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | None = None) -> QRAGRetriever:
        """Load a retriever written by :meth:`save` (every setting kept; no pickle).

        Raises:
            QRAGError: missing or corrupt files.
            IndexMismatchError: the index was built with another chunk encoder.
        """
        path = Path(path)
        try:
            saved = json.loads((path / SETTINGS_FILE).read_text(encoding="utf-8"))
            if not isinstance(saved, dict) or saved.get("format") != RETRIEVER_FORMAT:
                raise TypeError(f"not a {RETRIEVER_FORMAT} file")
            settings = saved["settings"]
            if not isinstance(settings, dict):
                raise TypeError(f"settings must be an object, got {type(settings).__name__}")
            settings = dict(settings)
        except FileNotFoundError as exc:
            raise QRAGError(f"{path} is not a saved QRAGRetriever: {SETTINGS_FILE} is missing") from exc
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise QRAGError(f"corrupt {path / SETTINGS_FILE}: {exc}") from exc
        if device is not None:
            settings["device"] = device
        model_ref = str(path / MODEL_DIR) if saved.get("model_in_folder") else settings.get("checkpoint")
        model = load_model(model_ref, device=settings.get("device", "cpu"))
        manifest = ChunkIndex.read_manifest(path / INDEX_DIR)
        if manifest.get("chunk_encoder_fingerprint") not in (None, chunk_encoder_fingerprint(model)):
            raise IndexMismatchError(
                f"the index in {path / INDEX_DIR} was embedded by a different chunk encoder than "
                f"{model_ref!r}; rebuild it"
            )
        index = ChunkIndex.load(path / INDEX_DIR, expected_dim=model.embedding_dim, device=settings.get("device", "cpu"))
        try:
            return cls(model=model, index=index, **settings)
        except ValidationError as exc:
            raise QRAGError(f"corrupt {path / SETTINGS_FILE}: {exc}") from exc


# -- helpers ------------------------------------------------------------------------------------
def _check_k(k: Any) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise QRAGError(f"k must be an integer >= 1, got {k!r}")


def _check_query(query: Any) -> None:
    if not isinstance(query, str):
        raise QRAGError(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise QRAGError("query is empty")
    _check_unicode(query, "query")


def _check_unicode(text: str, what: str) -> None:
    """Refuse strings the tokenizer cannot take (lone surrogates, e.g. from bad decoding)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QRAGError(f"{what} is not valid Unicode ({exc.reason} at position {exc.start})") from None


def _check_stop_threshold(threshold: Any) -> None:
    if threshold is None:
        return
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or math.isnan(threshold):
        raise QRAGError(f"stop_threshold must be a number or None, got {threshold!r}")


def _as_ids(ids: Any) -> list[str]:
    """Chunk ids as strings; a bare string or something that is not a collection is refused."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise QRAGError(f"ids must be a list of ids, got {type(ids).__name__}")
    return [str(i) for i in ids]


def _is_named_model(checkpoint: str | None) -> bool:
    """True for a packaged alias or hub name, False for a local folder (Q-RAG checkpoint or HF
    encoder), which is copied into a save so that the save is self-contained."""
    if checkpoint is None:
        return False
    return not Path(checkpoint).exists()


def _meta(hit: Hit) -> dict[str, Any]:
    return {**hit.chunk.metadata, META_STEP: hit.step, META_Q: hit.q_value,
            META_POSITION: hit.position, META_SCORE: hit.q_value}


def _to_lc(hit: Hit) -> LCDocument:
    return LCDocument(id=hit.chunk.id, page_content=hit.chunk.text, metadata=_meta(hit))


def _to_li(hit: Hit) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=hit.chunk.id, text=hit.chunk.text, metadata=_meta(hit)), score=hit.q_value)


def _to_chunks(documents: list[Any], splitter: Any) -> tuple[list[str], list[dict], list[str] | None, list[str]]:
    """Flatten framework documents into chunk texts, metadata, ids and document ids (in order)."""
    texts: list[str] = []
    metas: list[dict] = []
    ids: list[str] = []
    doc_ids: list[str] = []

    def push(text: str, meta: dict, chunk_id: str | None, doc_id: str) -> None:
        if not isinstance(text, str):
            raise QRAGError(f"document text must be a string, got {type(text).__name__}")
        texts.append(text)
        metas.append(dict(meta))
        ids.append(chunk_id or "")
        doc_ids.append(doc_id)

    for i, doc in enumerate(documents):
        if isinstance(doc, LCDocument):
            if splitter is None:
                push(doc.page_content, doc.metadata, doc.id, "documents")
            else:
                doc_id = doc.id or f"document-{i}"
                for piece in _split_text(splitter, doc.page_content):
                    push(piece, doc.metadata, None, doc_id)
        elif isinstance(doc, BaseNode):
            source = doc.ref_doc_id or doc.node_id
            if splitter is None:
                push(doc.get_content(), doc.metadata, doc.node_id, source)
            elif hasattr(splitter, "get_nodes_from_documents"):
                for node in splitter.get_nodes_from_documents([doc]):
                    push(node.get_content(), node.metadata, node.node_id, source)
            else:
                for piece in _split_text(splitter, doc.get_content()):
                    push(piece, doc.metadata, None, source)
        else:
            raise QRAGError(
                f"documents must be LangChain Documents or LlamaIndex nodes; item {i} is {type(doc).__name__}"
            )
    out_ids = None if not any(ids) else [x or f"chunk-{os.urandom(8).hex()}" for x in ids]
    return texts, metas, out_ids, doc_ids


def _split_text(splitter: Any, text: str) -> Iterable[str]:
    if hasattr(splitter, "split_text"):
        return splitter.split_text(text)
    raise QRAGError(f"unsupported text splitter {type(splitter).__name__}: need split_text() or get_nodes_from_documents()")
