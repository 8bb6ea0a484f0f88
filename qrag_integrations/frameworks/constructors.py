"""The ``from_*`` constructors of :class:`~qrag_integrations.frameworks.retriever.QRAGRetriever`:
from texts, LangChain / LlamaIndex documents and nodes, a LlamaIndex index, a LangChain vector
store (copied), a vector store searched in place (``from_store`` / ``from_qdrant``) or adopted
(``adopt``: embedded anew into a store searched in place), or a folder written by ``save``
(``load``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import ValidationError

from qrag_integrations.core import validation
from qrag_integrations.core.errors import QRAGError, UnknownOptionError
from qrag_integrations.core.persistence import SETTINGS_FILE, read_retriever
from qrag_integrations.core.threads import check_threads
from qrag_integrations.core.validation import check_options
from qrag_integrations.frameworks.conversion import llama_index_nodes, vector_store_documents

if TYPE_CHECKING:
    from llama_index.core.schema import BaseNode


#: Fields that only a store-backed retriever uses (refused, and not saved, without a store).
STORE_FIELDS = frozenset({"candidates_per_step", "check_exact"})
#: Fields that only the in-memory index's scan uses (refused with a store).
SCAN_FIELDS = frozenset({"scan", "rescore", "faiss_candidates"})
#: Fields a built retriever's model and index or store hold: fixed once it is built.
BUILD_FIELDS = frozenset({"checkpoint", "device", "index_dtype"})
#: How fast a search runs (``SearchSettings``; a store-backed search's own candidates too):
#: changed on a built retriever, its search is set up again.
SPEED_FIELDS = SCAN_FIELDS | STORE_FIELDS | {"threads"}
#: The search rules' fields: the same rules on every path, in memory and over a store.
RULE_FIELDS = frozenset(
    {"lexical_depth", "lexical_steps", "lexical_gap", "lexical_weight", "supersede"}
)


def check_store_options(
    fields: dict[str, Any],
    has_store: bool,
    has_index_or_texts: bool,
    collection_name: str | None,
    rank_by: str,
) -> None:
    """Refuse options that the retriever's kind (store-backed or in-memory) would not use.

    Raises:
        QRAGError: naming the first such option.
    """
    if not has_store:
        store_only = sorted(STORE_FIELDS & set(fields))
        if collection_name is not None or rank_by != "auto":
            store_only += ["collection_name" if collection_name is not None else "rank_by"]
        if store_only:
            raise QRAGError(
                f"{store_only[0]} applies to a store-backed retriever: use from_store(store, ...)"
            )
    elif has_index_or_texts:
        raise QRAGError(
            "a store-backed retriever takes no index= or texts=: add_texts() writes to the store"
        )
    elif SCAN_FIELDS & set(fields):
        raise QRAGError(
            f"{min(SCAN_FIELDS & set(fields))} applies to the in-memory index's scan, not "
            "to a store (a store-backed search re-scores candidates_per_step chunks per step)"
        )
    elif "index_dtype" in fields:
        raise QRAGError("index_dtype applies to the in-memory index, not to a store's vectors")


def check_assignment(name: str, value: Any, store_backed: bool) -> None:
    """Refuse setting field ``name`` to ``value`` on a built retriever where it could not take
    effect: a field its model and index or store hold, or one of the other kind of retriever;
    check ``k`` and ``threads`` before pydantic would coerce them, as the constructor does.

    Raises:
        QRAGError: naming the field and what to do instead.
    """
    if name in BUILD_FIELDS:
        raise QRAGError(
            f"{name} is fixed once a retriever is built (its model and index hold it): build "
            f"a new one with {name}=... (a from_* constructor, or QRAGRetriever.load(path, ...) "
            "for device)"
        )
    check_store_options({name: value}, store_backed, False, None, "auto")
    if store_backed and name == "document_key":
        raise QRAGError(
            "document_key is fixed once a store-backed retriever is built: the store's "
            "documents were read by it; build a new one with from_store(..., document_key=...)"
        )
    check_before_coercion({name: value})


def check_before_coercion(fields: dict[str, Any]) -> None:
    """Check ``k`` and ``threads`` among ``fields`` as given, before pydantic would coerce
    ``"3"``, ``True`` or ``2.0`` to an int.

    Raises:
        QRAGError: naming the field.
    """
    if "k" in fields:
        validation.check_k(fields["k"])
    check_threads(fields.get("threads"))


class RetrieverConstructors:
    """Class methods that build a retriever; each passes unknown keywords to ``cls(...)``, which
    refuses them (``cls._refuse_unknown``)."""

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        checkpoint: str | None = None,
        k: int = 4,
        doc_id: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """Index raw texts, each one chunk (as :meth:`add_texts`).

        Args:
            texts: chunk texts.
            metadatas: metadata per text.
            ids: ids per text (default: derived from document, text and metadata).
            checkpoint: checkpoint folder or HF encoder name; default: the packaged model.
            k: default number of steps.
            doc_id: the one document the texts form, in this order (a story, a log); without
                it each text is its own document unless ``metadata["source"]`` (the
                ``document_key`` field) names one.
            **kwargs: other fields (``device``, ``stop_threshold``, ...); no other name.
        """
        cls._refuse_unknown(kwargs, "from_texts", "metadatas", "ids", "doc_id")
        retriever = cls(checkpoint=checkpoint, k=k, **kwargs)
        retriever.add_texts(texts, metadatas=metadatas, ids=ids, doc_id=doc_id)
        return retriever

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Any],
        checkpoint: str | None = None,
        k: int = 4,
        text_splitter: Any = None,
        **kwargs: Any,
    ) -> Self:
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
    ) -> Self:
        """Index LlamaIndex nodes (ids, metadata and source document are kept)."""
        cls._refuse_unknown(kwargs, "from_nodes", "text_splitter")
        return cls.from_documents(list(nodes), checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def from_llama_index(
        cls, index: Any, checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> Self:
        """Re-index the nodes of an existing LlamaIndex index (e.g. a ``VectorStoreIndex``).

        The nodes come from its docstore; chunk embeddings are recomputed with the Q-RAG chunk
        encoder (the vector store's own embeddings belong to another model).
        """
        cls._refuse_unknown(kwargs, "from_llama_index", "text_splitter")
        return cls.from_nodes(llama_index_nodes(index), checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def from_vector_store(
        cls,
        vector_store: Any,
        ids: Sequence[str] | None = None,
        checkpoint: str | None = None,
        k: int = 4,
        **kwargs: Any,
    ) -> Self:
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
    def from_store(
        cls, store: Any, checkpoint: str | None = None, k: int = 4, **kwargs: Any
    ) -> Self:
        """Search a vector store in place, nothing copied.

        A store a framework filled its own way (``InMemoryVectorStore.from_documents(docs,
        QRAGEmbeddings(model))``, ``VectorStoreIndex(nodes, embed_model=QRAGLlamaEmbedding(model))``)
        is searched as it is: chunk ids, documents and their order are derived as the in-memory
        index derives them (docs/stores.md). A store of another model's vectors is refused with
        an ``IndexMismatchError`` naming :meth:`adopt`.

        Args:
            store: a ``QdrantClient`` (with ``collection_name=``), a langchain-qdrant or llama-index
                ``QdrantVectorStore`` over a collection a Q-RAG ingest wrote, a LangChain
                ``InMemoryVectorStore`` built with
                :class:`~qrag_integrations.frameworks.embeddings.QRAGEmbeddings`, a LlamaIndex
                ``VectorStoreIndex`` built with
                :class:`~qrag_integrations.frameworks.embeddings.QRAGLlamaEmbedding` (texts from
                its docstore) or a ``SimpleVectorStore`` a Q-RAG ingest wrote.
            checkpoint: checkpoint folder or packaged name (the store's vectors must be its chunk
                encoder's).
            k: default number of steps.
            **kwargs: fields (``candidates_per_step``, ``check_exact``, ``document_key``, ...),
                ``collection_name``, ``rank_by``, ``model``.
        """
        cls._refuse_unknown(kwargs, "from_store")
        return cls(store=store, checkpoint=checkpoint, k=k, **kwargs)

    @classmethod
    def adopt(
        cls,
        store: Any,
        checkpoint: str | None = None,
        k: int = 4,
        collection_name: str | None = None,
        into: Any = None,
        into_collection: str | None = None,
        batch_size: int = 64,
        show_progress: bool = True,
        **kwargs: Any,
    ) -> Self:
        """Make a store of another model's vectors searchable: read its texts and metadata, embed
        them with the chunk encoder into a new collection or store, and search that in place.

        Running the same call again resumes: chunks already written are skipped. The store
        adopted is only read.

        Args:
            store: a ``QdrantClient`` (with ``collection_name=``), a langchain-qdrant or llama-index
                ``QdrantVectorStore``, a LangChain ``InMemoryVectorStore``, a LlamaIndex
                ``VectorStoreIndex``.
            checkpoint: checkpoint folder or packaged name; default: the packaged model.
            k: default number of steps.
            collection_name: the Qdrant collection adopted when ``store`` is a client.
            into: the target: a ``QdrantClient`` (with ``into_collection``), an
                ``InMemoryVectorStore`` built with ``QRAGEmbeddings`` or a ``SimpleVectorStore``.
                Default: for Qdrant, the same client, collection ``<collection_name>-qrag``; a new
                in-memory store of the same framework otherwise.
            into_collection: the target Qdrant collection (created if missing).
            batch_size: texts per chunk-encoder batch.
            show_progress: progress over the chunks (a bar, or log lines where none can be drawn).
            **kwargs: fields (``candidates_per_step``, ``document_key``, ``device``, ...),
                ``model``, ``rank_by``.
        """
        from qrag_integrations.core.defaults import default_checkpoint
        from qrag_integrations.core.loading import load_model
        from qrag_integrations.stores.adopt import adopt as adopt_store

        cls._refuse_unknown(kwargs, "adopt")
        model = kwargs.pop("model", None)
        if model is None:
            device = kwargs.get("device", cls.model_fields["device"].default)
            model = load_model(checkpoint or default_checkpoint(), device=device).eval()
        adopted = adopt_store(
            store,
            model,
            collection_name=collection_name,
            into=into,
            into_collection=into_collection,
            document_key=kwargs.get("document_key", cls.model_fields["document_key"].default),
            batch_size=batch_size,
            show_progress=show_progress,
        )
        return cls(
            store=adopted.store,
            collection_name=adopted.collection_name,
            model=model,
            checkpoint=checkpoint,
            k=k,
            **kwargs,
        )

    @classmethod
    def from_qdrant(
        cls, collection_name: str, url: str | None = None, path: str | None = None, **kwargs: Any
    ) -> Self:
        """Over a Qdrant collection: a server at ``url``, local files at ``path``, or in memory.

        Args:
            collection_name: the collection (created if missing).
            url: server URL (``http://localhost:6333``).
            path: folder of embedded local mode (``None`` with no ``url``: in memory).
            **kwargs: fields, ``checkpoint`` / ``model`` and ``rank_by``; an unknown name raises
                :class:`~qrag_integrations.core.errors.UnknownOptionError`.
        """
        from qrag_integrations.stores.qdrant import connect  # qdrant-client is optional

        cls._refuse_unknown(kwargs, "from_qdrant")
        return cls(store=connect(url=url, path=path), collection_name=collection_name, **kwargs)

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | None = None, **options: Any) -> Self:
        """Load a retriever written by :meth:`save` (every setting kept; no pickle), with
        ``options`` changed: the constructors' fields (``k=2``, ``scan="int8"``,
        ``lexical_steps=3``, ...), each set as on a built retriever.

        Args:
            path: the saved folder.
            device: load onto this device instead of the saved one.
            **options: fields to change; ``checkpoint`` and ``index_dtype`` are held by the
                saved model and index, store-only fields by store-backed retrievers.

        Raises:
            QRAGError: missing or corrupt files, or an option a loaded retriever cannot take.
            UnknownOptionError: a name no retriever takes.
            IndexMismatchError: the index was built with another chunk encoder.
        """
        check_options(options, cls.model_fields, f"{cls.__name__}.load")
        for name, value in options.items():  # before the costly read
            check_assignment(name, value, store_backed=False)
        saved = read_retriever(path, device=device)
        try:
            retriever = cls(model=saved.model, index=saved.index, **saved.settings)
        except (ValidationError, UnknownOptionError) as exc:
            raise QRAGError(f"corrupt {Path(path) / SETTINGS_FILE}: {exc}") from exc
        for name, value in options.items():
            setattr(retriever, name, value)
        return retriever
