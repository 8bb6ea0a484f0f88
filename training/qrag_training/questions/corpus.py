"""Documents split into chunks exactly as the trainer will split them, each with its side.

The chunks come from :func:`qrag_training.data.custom.split_document` with the settings the
trainer is given (``env.chunk_size``, ``env.splitter``), so a line's ``documents`` load back into
the same chunks.

A document's side is the stable hash split of the key the custom loader gives it (``doc:<id>``,
:mod:`qrag_training.data.groups`). The loader holds lines out by group: documents joined by the
lines they share. So a line only ever holds documents of one *cluster*: consecutive documents
(in input order, where related files tend to sit together) of one side, about twice
``pool_chunks`` chunks each. Groups then never cross a side, and stay small enough that the
trainer has many to split: under its hash split every document's lines land on the document's
side, and a split fitted over groups still keeps each document on one side.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from qrag_training.data.custom import split_document
from qrag_training.data.splits import split_of
from qrag_training.questions.errors import QuestionGenerationError
from qrag_training.questions.settings import SPLIT_HASH, QuestionSettings
from qrag_training.questions.sources import SourceDocument
from qrag_training.questions.spans import answer_spans, lower_words, normalise, sentences

logger = logging.getLogger(__name__)
ALL_SIDES = "all"


@dataclass(frozen=True)
class Chunk:
    """One chunk of a document."""

    doc: int
    """Index of its document in :attr:`Corpus.documents`."""
    position: int
    """Its index among the document's chunks."""
    text: str
    """The text, as the trainer's splitter returns it."""
    start: int | None
    """Offset of the text in the document (``None`` where the splitter rewrote whitespace)."""


@dataclass
class Corpus:
    """Documents, their chunks, sides and the names each chunk mentions."""

    documents: list[SourceDocument]
    chunks: list[Chunk]
    doc_chunks: list[list[int]]
    """Per document, its chunk ids in order."""
    sides: list[str]
    """Per document, its side: ``train``, ``val``, ``eval`` (split hash) or ``all``."""
    clusters: list[int]
    """Per document, its cluster: the documents a line may hold together (one side)."""
    names: list[set[str]] = field(default_factory=list)
    """Per chunk, the normalised names it mentions."""

    def cluster_of_chunk(self, chunk: int) -> int:
        """The cluster of a chunk's document."""
        return self.clusters[self.chunks[chunk].doc]


def document_side(doc_id: str, settings: QuestionSettings) -> str:
    """The trainer's hash side of a document with this id (or ``all`` with ``split='none'``)."""
    return split_of(f"doc:{doc_id}") if settings.split == SPLIT_HASH else ALL_SIDES


def _offsets(text: str, parts: Sequence[str]) -> list[int | None]:
    """Where each chunk starts in the text, searching forward (``None`` if not found verbatim)."""
    out: list[int | None] = []
    cursor = 0
    for part in parts:
        at = text.find(part, cursor)
        out.append(at if at >= 0 else None)
        cursor = at + 1 if at >= 0 else cursor
    return out


def build_corpus(documents: Sequence[SourceDocument], settings: QuestionSettings) -> Corpus:
    """Split every document and find the names of every chunk.

    Documents with no text are skipped; a repeated text is kept once.

    Raises:
        QuestionGenerationError: no document has text, or two different texts share an id.
    """
    kept: list[SourceDocument] = []
    texts: dict[str, str] = {}
    seen_texts: set[str] = set()
    for doc in documents:
        if not doc.text.strip():
            continue
        if doc.id in texts and texts[doc.id] != doc.text:
            raise QuestionGenerationError(
                f"two different documents have the id {doc.id!r}: ids decide the train / "
                "held-out split and must be unique"
            )
        if normalise(doc.text) in seen_texts:
            continue
        texts[doc.id] = doc.text
        seen_texts.add(normalise(doc.text))
        kept.append(doc)
    if len(kept) < len(documents):
        logger.info("skipped %d empty or repeated documents", len(documents) - len(kept))
    if not kept:
        raise QuestionGenerationError("no document has any text to write questions from")
    chunks: list[Chunk] = []
    doc_chunks: list[list[int]] = []
    names: list[set[str]] = []
    for d, doc in enumerate(kept):
        parts = split_document(
            doc.text, settings.chunk_size, settings.chunk_overlap, settings.splitter
        )
        ids = []
        lowercase = lower_words(doc.text)
        for position, (part, start) in enumerate(zip(parts, _offsets(doc.text, parts))):
            ids.append(len(chunks))
            chunks.append(Chunk(d, position, part, start))
            names.append(
                {
                    normalise(s.text)
                    for sentence in sentences(part)
                    for s in answer_spans(sentence, lowercase)
                    if s.kind == "name"
                }
            )
        doc_chunks.append(ids)
    sides = [document_side(doc.id, settings) for doc in kept]
    clusters = _clusters(sides, [len(ids) for ids in doc_chunks], 2 * settings.pool_chunks)
    return Corpus(kept, chunks, doc_chunks, sides, clusters, names)


def _clusters(sides: Sequence[str], sizes: Sequence[int], chunks_per_cluster: int) -> list[int]:
    """Consecutive documents of each side, in order, grouped until a group holds
    ``chunks_per_cluster`` chunks."""
    out: list[int] = []
    open_cluster: dict[str, tuple[int, int]] = {}  # side -> (cluster id, chunks so far)
    count = 0
    for side, size in zip(sides, sizes):
        cluster, held = open_cluster.get(side, (-1, chunks_per_cluster))
        if held >= chunks_per_cluster:
            cluster, held, count = count, 0, count + 1
        out.append(cluster)
        open_cluster[side] = (cluster, held + size)
    return out


def name_index(corpus: Corpus) -> dict[str, list[int]]:
    """Normalised name -> the chunks that mention it, in corpus order."""
    index: dict[str, list[int]] = defaultdict(list)
    for c, found in enumerate(corpus.names):
        for name in sorted(found):
            index[name].append(c)
    return index
