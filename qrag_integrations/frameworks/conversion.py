"""Conversion between framework objects and the core's chunks, hits and filters.

In: LangChain ``Document``\\ s, LlamaIndex ``Document``\\ s and nodes (optionally cut by a
LangChain ``TextSplitter`` or a LlamaIndex ``NodeParser``), the documents of a LangChain vector
store or of a LlamaIndex index, all flattened into :class:`ChunkRows`. Out: a search
:class:`~qrag_integrations.core.search.Hit` as a LangChain ``Document`` or a LlamaIndex
``NodeWithScore``, with the pick's step, Q-value and position in its metadata. Filters:
LlamaIndex ``MetadataFilters`` in the filter language of :mod:`qrag_integrations.core.filters`,
and the one normalisation a search applies to the filter it is given (:func:`as_filter`).

This module (with :mod:`~qrag_integrations.frameworks.retriever`) is where LangChain and LlamaIndex are
imported; the core never imports it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document as LCDocument
from llama_index.core.schema import (
    BaseNode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from qrag_integrations.core.chunks import Chunk, derived_chunk_ids
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.filters import parse_filter
from qrag_integrations.core.search import Hit

#: The metadata key that names a chunk's document by default (LangChain loaders set it).
DOCUMENT_KEY = "source"

#: Metadata keys added to every result.
META_STEP, META_Q, META_POSITION, META_SCORE = "qrag_step", "qrag_q_value", "qrag_position", "score"
#: Metadata key of a result's document id (also the LlamaIndex node's ``ref_doc_id``).
META_DOC = "qrag_doc_id"


# -- hits and chunks -> framework objects -----------------------------------------------------
def hit_metadata(hit: Hit) -> dict[str, Any]:
    """The chunk's metadata plus its document id and the pick's step, Q-value, position and
    score (= Q-value)."""
    return {
        **hit.chunk.metadata,
        META_DOC: hit.chunk.doc_id,
        META_STEP: hit.step,
        META_Q: hit.q_value,
        META_POSITION: hit.position,
        META_SCORE: hit.q_value,
    }


def hit_to_langchain(hit: Hit) -> LCDocument:
    """A hit as a LangChain ``Document`` (id = chunk id)."""
    return LCDocument(id=hit.chunk.id, page_content=hit.chunk.text, metadata=hit_metadata(hit))


def hit_to_llama_index(hit: Hit) -> NodeWithScore:
    """A hit as a LlamaIndex ``NodeWithScore`` (node id = chunk id, ``ref_doc_id`` = its
    document, score = Q-value)."""
    node = TextNode(
        id_=hit.chunk.id,
        text=hit.chunk.text,
        metadata=hit_metadata(hit),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.chunk.doc_id)},
    )
    return NodeWithScore(node=node, score=hit.q_value)


def chunk_to_langchain(chunk: Chunk) -> LCDocument:
    """A stored chunk as a LangChain ``Document`` (its own metadata only)."""
    return LCDocument(id=chunk.id, page_content=chunk.text, metadata=dict(chunk.metadata))


# -- framework documents -> chunks ------------------------------------------------------------
@dataclass
class ChunkRows:
    """Chunks to add to an index, in document order."""

    texts: list[str] = field(default_factory=list)
    """Chunk texts."""
    metadatas: list[dict[str, Any]] = field(default_factory=list)
    """Metadata of each chunk (a copy of its document's or node's)."""
    ids: list[str] = field(default_factory=list)
    """Chunk ids: the documents' own, else derived from document, text and metadata."""
    doc_ids: list[str] = field(default_factory=list)
    """Document each chunk belongs to (chunks of one document in this order)."""
    given_ids: bool = False
    """Whether any id came from the documents (the rest were derived)."""


def document_of(
    metadata: Mapping[str, Any], document_key: str | None, fallback: str | None
) -> str | None:
    """A chunk's document id: ``metadata[document_key]`` where set, else ``fallback`` (the
    framework's document id; ``None``: the chunk is its own document)."""
    named = metadata.get(document_key) if document_key is not None else None
    if named is not None and named != "":
        return str(named)
    return fallback


def documents_to_chunks(
    documents: Sequence[Any], splitter: Any = None, document_key: str | None = DOCUMENT_KEY
) -> ChunkRows:
    """Flatten framework documents into chunks, in order.

    A chunk's document is ``metadata[document_key]`` where the document has it, else the
    framework's document id: a split LangChain ``Document``'s ``id`` (a hash of its text when
    it has none), a LlamaIndex node's ``ref_doc_id``; an unsplit LangChain document or a node
    without a source is its own document. Chunks of one document keep the order they come in;
    documents are ordered by id in the index, so the order documents come in never matters.
    Blank documents and pieces are skipped with one warning.

    Args:
        documents: LangChain ``Document``\\ s or LlamaIndex ``Document``\\ s / nodes.
        splitter: a LangChain ``TextSplitter`` (``split_text``) or a LlamaIndex ``NodeParser``
            (``get_nodes_from_documents``), or ``None``.
        document_key: the metadata key naming a chunk's document (``None``: none is read).

    Returns:
        The chunks; ids are the documents' / nodes' ids, derived from document, text and
        metadata where there is none (:func:`~qrag_integrations.core.chunks.derived_chunk_ids`).

    Raises:
        QRAGError: an item is not a framework document, a text is not a string, or the splitter
            has neither method.
    """
    if isinstance(documents, (LCDocument, BaseNode)):
        raise QRAGError(
            f"documents must be a list; got a single {type(documents).__name__}: pass [document]"
        )
    rows = ChunkRows()
    ids: list[str | None] = []
    groups: list[str | None] = []
    blank: list[int] = []

    def push(text: Any, meta: dict[str, Any], chunk_id: str | None, doc_id: str | None) -> None:
        if not isinstance(text, str):
            raise QRAGError(f"document text must be a string, got {type(text).__name__}")
        if not text.strip():  # a blank page or piece: nothing in it can be found
            blank.append(len(blank))
            return
        rows.texts.append(text)
        rows.metadatas.append(dict(meta))
        ids.append(chunk_id or None)
        groups.append(doc_id)

    for i, doc in enumerate(documents):
        if isinstance(doc, LCDocument):
            if splitter is None:
                push(
                    doc.page_content,
                    doc.metadata,
                    doc.id,
                    document_of(doc.metadata, document_key, None),
                )
            else:
                own = doc.id or "doc-" + derived_chunk_ids([doc.page_content], [None])[0][2:]
                doc_id = document_of(doc.metadata, document_key, own)
                for piece in split_text(splitter, doc.page_content):
                    push(piece, doc.metadata, None, doc_id)
        elif isinstance(doc, BaseNode):
            source = doc.ref_doc_id or document_of(doc.metadata, document_key, None)
            if splitter is None:
                push(doc.get_content(), doc.metadata, doc.node_id, source)
            elif hasattr(splitter, "get_nodes_from_documents"):
                for node in splitter.get_nodes_from_documents([doc]):
                    push(node.get_content(), node.metadata, node.node_id, source or doc.node_id)
            else:
                for piece in split_text(splitter, doc.get_content()):
                    push(piece, doc.metadata, None, source or doc.node_id)
        else:
            raise QRAGError(
                f"documents must be LangChain Documents or LlamaIndex nodes; item {i} is {type(doc).__name__}"
            )
    if blank:
        warnings.warn(
            f"skipped {len(blank)} blank document(s) or piece(s): nothing in them can be found",
            UserWarning,
            stacklevel=3,
        )
    rows.given_ids = any(ids)
    rows.ids, rows.doc_ids = chunk_identities(rows.texts, groups, rows.metadatas, ids)
    return rows


def chunk_identities(
    texts: Sequence[str],
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str | None] | None = None,
) -> tuple[list[str], list[str]]:
    """``(chunk ids, document ids)`` of chunks: an id not given is derived from the chunk's
    document, text and metadata (:func:`~qrag_integrations.core.chunks.derived_chunk_ids`); a
    chunk without a document (``None``) is its own document, named by its chunk id."""
    derived = derived_chunk_ids(texts, documents, metadatas)
    chunk_ids = [given or made for given, made in zip(ids or [None] * len(texts), derived)]
    return chunk_ids, [doc or chunk for doc, chunk in zip(documents, chunk_ids)]


def split_text(splitter: Any, text: str) -> Iterable[str]:
    """The pieces of ``text`` from a splitter with ``split_text`` (LangChain's interface)."""
    if hasattr(splitter, "split_text"):
        return splitter.split_text(text)
    raise QRAGError(
        f"unsupported text splitter {type(splitter).__name__}: need split_text() or get_nodes_from_documents()"
    )


def vector_store_documents(vector_store: Any, ids: Sequence[str] | None = None) -> list[LCDocument]:
    """The documents of a LangChain vector store.

    Args:
        vector_store: a LangChain ``VectorStore``.
        ids: which documents to read (through ``get_by_ids``); ``None``: all, which needs a store
            that exposes them (``InMemoryVectorStore``).

    Raises:
        QRAGError: no ``ids`` and the store cannot list its documents.
    """
    if ids is not None:
        return list(vector_store.get_by_ids(list(ids)))
    if isinstance(getattr(vector_store, "store", None), dict):
        return [
            LCDocument(id=i, page_content=v["text"], metadata=v.get("metadata", {}))
            for i, v in vector_store.store.items()
        ]
    raise QRAGError(
        f"{type(vector_store).__name__} cannot list its documents; pass ids= to read them "
        "with get_by_ids"
    )


def llama_index_nodes(index: Any) -> list[BaseNode]:
    """The nodes in the docstore of a LlamaIndex index (e.g. a ``VectorStoreIndex``).

    Raises:
        QRAGError: the docstore holds no nodes.
    """
    nodes = list(index.docstore.docs.values())
    if not nodes:
        raise QRAGError(
            "the LlamaIndex index's docstore holds no nodes (was it built with store_nodes_override?)"
        )
    return nodes


# -- filters ---------------------------------------------------------------------------------
#: LlamaIndex operators with a counterpart of the same meaning.
_SAME = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$contains",
}
_MAPPED = [*_SAME, FilterOperator.ANY, FilterOperator.ALL, FilterOperator.IS_EMPTY]


def _values(f: MetadataFilter) -> list[Any]:
    if not isinstance(f.value, list):
        raise QRAGError(
            f"LlamaIndex filter on {f.key!r}: {f.operator.name} takes a list, got {f.value!r}"
        )
    return list(f.value)


def _one(f: MetadataFilter) -> dict[str, Any]:
    key, op = f.key, f.operator
    if op == FilterOperator.TEXT_MATCH and not isinstance(f.value, str):
        raise QRAGError(f"LlamaIndex filter on {key!r}: TEXT_MATCH takes a string, got {f.value!r}")
    if op in (FilterOperator.IN, FilterOperator.NIN):
        return {key: {_SAME[op]: _values(f)}}
    if op in _SAME:
        return {key: {_SAME[op]: f.value}}
    if op in (FilterOperator.ANY, FilterOperator.ALL):
        parts = [{key: {"$contains": v}} for v in _values(f)]
        return {"$or" if op == FilterOperator.ANY else "$and": parts}
    if op == FilterOperator.IS_EMPTY:  # missing, None, "" or []
        return {"$or": [{key: {"$exists": False}}, {key: None}, {key: ""}, {key: {"$eq": []}}]}
    raise QRAGError(
        f"LlamaIndex filter on {key!r}: operator {op.name} has no counterpart here; supported: "
        f"{', '.join(o.name for o in _MAPPED)}"
    )


def from_llama_filters(filters: MetadataFilters | MetadataFilter) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` (nested ones too) as a filter mapping: ``AND`` / ``OR`` as
    ``$and`` / ``$or``, ``NOT`` (none of the filters holds) as ``$not`` over their ``$or``.

    Raises:
        QRAGError: an operator without a counterpart (``TEXT_MATCH_INSENSITIVE``), or a value
            of the wrong shape.
    """
    if isinstance(filters, MetadataFilter):
        return _one(filters)
    parts = [from_llama_filters(f) for f in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return {"$and": parts}
    if condition == FilterCondition.OR:
        return {"$or": parts}
    if condition == FilterCondition.NOT:
        return {"$not": {"$or": parts}}
    raise QRAGError(
        f"LlamaIndex filter condition {condition!r} has no counterpart here: AND, OR, NOT"
    )


def as_filter(filter: Any) -> Any:
    """The filter a search runs with: LlamaIndex ``MetadataFilters`` converted, a mapping checked
    (so a bad one is refused before any search), anything else (``None``, a callable, a store's
    own filter object) as it is.

    Raises:
        QRAGError: a mapping that is no filter, or ``MetadataFilters`` without a counterpart.
    """
    if isinstance(filter, (MetadataFilters, MetadataFilter)):
        return from_llama_filters(filter)
    if isinstance(filter, Mapping):
        parse_filter(filter)
    return filter
