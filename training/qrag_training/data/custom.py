"""Your own corpus as JSONL: one question (and its context) per line.

Each line is a JSON object with these keys (see also ``training/DATA_FORMAT.md``)::

    {
      "id": "q1",                      # optional; default: the line number ("1", "2", ...)
      "question": "Who wrote ...?",     # required, non-empty
      "answer": "...",                  # optional
      "chunks": ["...", "..."],         # the retrieval units, in document order
      "documents": [{"id": "d1", "title": "...", "text": "..."}],   # OR documents
      "support": [0, 3],                # optional: indices into the chunks
      "support_text": ["..."],          # optional: texts; every chunk containing one is support
      "meta": {...}                     # optional: anything, copied to Episode.meta
    }

Exactly one of ``chunks`` and ``documents`` must be given. Documents (``id`` and ``title``
optional, ``text`` required) are split into chunks one by one, in order; a chunk's title is
the document's ``title``, else its ``id``. Splitting uses
``langchain_text_splitters.RecursiveCharacterTextSplitter(chunk_size, chunk_overlap)`` when
that package is importable (``splitter="auto"``), otherwise the sentence splitter: sentences
(:func:`qrag_training.data.noise.split_sentences`: a boundary is whitespace after ".", "!"
or "?" before a capital) packed greedily, in order, into chunks of at most ``chunk_size``
characters (a longer sentence is a chunk of its own). Pass ``splitter="sentences"`` for the
same chunks on every machine.

``support`` and ``support_text`` may be combined (the union is taken). A ``support_text``
entry matches a chunk that contains it, ignoring case and runs of whitespace; an entry that
matches no chunk is an error (it may have been cut by the splitter: raise ``chunk_size``).
Unlabeled lines (no support) are allowed: they need an answer-based reward.

Held-out by document: the train / eval hash split keeps lines that share a document on one
side (``group_by``, :mod:`qrag_training.data.groups`).

Blank lines are skipped. Malformed lines raise :class:`CustomFormatError` naming the file,
the line number and the problem; so does a file without a question.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from qrag_training.data.episode import Episode
from qrag_training.data.groups import (
    DOCUMENT_KEYS,
    GROUP_AUTO,
    assign_split_keys,
    check_group_by,
    text_key,
)
from qrag_training.data.noise import split_sentences

SOURCE_NAME = "custom"
DEFAULT_CHUNK_SIZE = 500  # characters
DEFAULT_CHUNK_OVERLAP = 0
SPLITTER_AUTO, SPLITTER_LANGCHAIN, SPLITTER_SENTENCES = "auto", "langchain", "sentences"
SPLITTERS: tuple[str, ...] = (SPLITTER_AUTO, SPLITTER_LANGCHAIN, SPLITTER_SENTENCES)
LANGCHAIN_SPLITTER_MODULE = "langchain_text_splitters"
ALLOWED_KEYS = frozenset(
    {"id", "question", "answer", "chunks", "documents", "support", "support_text", "meta"}
)
_SPACES = re.compile(r"\s+")


class CustomFormatError(ValueError):
    """A line of a custom JSONL file breaks the format; the message names file and line."""


def _resolve_splitter(splitter: str) -> str:
    if splitter not in SPLITTERS:
        raise ValueError(f"unknown splitter {splitter!r}; valid: {', '.join(SPLITTERS)}")
    if splitter == SPLITTER_AUTO:
        found = importlib.util.find_spec(LANGCHAIN_SPLITTER_MODULE) is not None
        return SPLITTER_LANGCHAIN if found else SPLITTER_SENTENCES
    return splitter


def pack_sentences(text: str, chunk_size: int) -> list[str]:
    """Split text into sentences and pack them, in order, into chunks of <= chunk_size chars.

    Args:
        text: The document text.
        chunk_size: Most characters per chunk (a longer sentence stays whole).

    Returns:
        The chunks.
    """
    chunks: list[str] = []
    current = ""
    for sentence in split_sentences(text):
        candidate = f"{current} {sentence}" if current else sentence
        if current and len(candidate) > chunk_size:
            chunks.append(current)
            current = sentence
        else:
            current = candidate
    if current:
        chunks.append(current)
    return chunks


def split_document(
    text: str,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    splitter: str = SPLITTER_AUTO,
) -> list[str]:
    """Split one document into chunks.

    Args:
        text: The document text.
        chunk_size: Target chunk size in characters.
        chunk_overlap: Overlap in characters (LangChain splitter only).
        splitter: "auto", "langchain" or "sentences" (see the module docstring).

    Returns:
        The non-empty chunks, in order.

    Raises:
        ImportError: If "langchain" is asked for and the package is missing.
    """
    if _resolve_splitter(splitter) == SPLITTER_LANGCHAIN:
        try:
            from langchain_text_splitters import RecursiveCharacterTextSplitter
        except ImportError as err:
            raise ImportError(
                "splitter='langchain' needs langchain-text-splitters "
                "(pip install langchain-text-splitters)"
            ) from err
        parts = RecursiveCharacterTextSplitter(
            chunk_size=chunk_size, chunk_overlap=chunk_overlap
        ).split_text(text)
        return [p.strip() for p in parts if p.strip()]
    return pack_sentences(text, chunk_size)


def _normalise(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


class _Line:
    """Parses one record; ``fail`` raises with the file and line number."""

    def __init__(self, path: Path, line_no: int) -> None:
        self.where = f"{path}:{line_no}"
        self.line_no = line_no

    def fail(self, problem: str) -> CustomFormatError:
        return CustomFormatError(f"{self.where}: {problem}")

    def string_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list) or not value:
            raise self.fail(f"'{key}' must be a non-empty list of strings")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(f"'{key}'[{i}] must be a non-empty string")
        return value

    def documents(
        self, value: Any, chunk_size: int, chunk_overlap: int, splitter: str
    ) -> tuple[list[str], list[str], list[str], list[str]]:
        """Chunks, their titles and document ids, and each document's key for grouping (its
        ``id`` when given, else its text: :mod:`qrag_training.data.groups`)."""
        if not isinstance(value, list) or not value:
            raise self.fail("'documents' must be a non-empty list of objects")
        chunks, titles, doc_ids, keys = [], [], [], []
        for i, doc in enumerate(value):
            if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                raise self.fail(f"'documents'[{i}] must be an object with a string 'text'")
            doc_id = str(doc.get("id", i))
            key = f"doc:{doc['id']}" if "id" in doc else text_key("doc", doc["text"])
            if key not in keys:
                keys.append(key)
            title = str(doc.get("title") or doc_id)
            parts = split_document(doc["text"], chunk_size, chunk_overlap, splitter)
            chunks += parts
            titles += [title] * len(parts)
            doc_ids += [doc_id] * len(parts)
        if not chunks:
            raise self.fail("'documents' hold no text to split into chunks")
        return chunks, titles, doc_ids, keys

    def support(self, record: dict[str, Any], chunks: list[str]) -> list[int]:
        support: list[int] = []
        raw = record.get("support", [])
        if not isinstance(raw, list):
            raise self.fail("'support' must be a list of chunk indices")
        for idx in raw:
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise self.fail(f"support index {idx!r} is not an integer")
            if not 0 <= idx < len(chunks):
                raise self.fail(
                    f"support index {idx} out of range for {len(chunks)} chunks "
                    f"(valid: 0..{len(chunks) - 1})"
                )
            if idx in support:
                raise self.fail(f"duplicate support index {idx}")
            support.append(idx)
        if "support_text" in record:
            normalised = [_normalise(c) for c in chunks]
            for text in self.string_list(record["support_text"], "support_text"):
                hits = [i for i, c in enumerate(normalised) if _normalise(text) in c]
                if not hits:
                    raise self.fail(
                        f"support_text {text[:60]!r} is in no chunk "
                        "(if documents are split, it may have been cut: raise chunk_size)"
                    )
                support += [i for i in hits if i not in support]
            support.sort()
        return support

    def episode(self, raw: str, chunk_size: int, chunk_overlap: int, splitter: str) -> Episode:
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise self.fail(f"invalid JSON: {err.msg} (column {err.colno})") from err
        if not isinstance(record, dict):
            raise self.fail(f"expected a JSON object, got {type(record).__name__}")
        unknown = sorted(set(record) - ALLOWED_KEYS)
        if unknown:
            raise self.fail(f"unknown keys {unknown}; allowed: {sorted(ALLOWED_KEYS)}")
        question = record.get("question")
        if not isinstance(question, str) or not question.strip():
            raise self.fail("missing or empty 'question'")
        answer = record.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise self.fail("'answer' must be a string")
        meta = record.get("meta", {})
        if not isinstance(meta, dict):
            raise self.fail("'meta' must be an object")
        if ("chunks" in record) == ("documents" in record):
            raise self.fail("give exactly one of 'chunks' and 'documents'")
        titles: list[str] | None = None
        meta = {**meta, "source": SOURCE_NAME, "line": self.line_no}
        if "chunks" in record:
            chunks = list(self.string_list(record["chunks"], "chunks"))
        else:
            chunks, titles, doc_ids, keys = self.documents(
                record["documents"], chunk_size, chunk_overlap, splitter
            )
            meta["chunk_doc_ids"] = doc_ids
            meta[DOCUMENT_KEYS] = keys
        return Episode(
            id=str(record.get("id", self.line_no)),
            question=question,
            chunks=chunks,
            support=self.support(record, chunks),
            answer=answer,
            titles=titles,
            meta=meta,
        )


def load_custom_jsonl(
    path: str | Path,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    splitter: str = SPLITTER_AUTO,
    group_by: str = GROUP_AUTO,
) -> list[Episode]:
    """Load a corpus in the custom JSONL format (see the module docstring).

    Args:
        path: The JSONL file.
        chunk_size: Chunk size in characters when ``documents`` are split.
        chunk_overlap: Chunk overlap in characters (LangChain splitter only).
        splitter: "auto", "langchain" or "sentences".
        group_by: what keeps lines on one side of the train / eval split: "auto" (lines that
            share a document), "line" or "meta.<field>" (:mod:`qrag_training.data.groups`); the
            key is ``episode.meta["split_key"]``.

    Returns:
        One episode per non-blank line.

    Raises:
        CustomFormatError: (a ValueError) for a malformed line or a repeated id, naming
            the file, the line number and the problem; or a file without questions.
    """
    path = Path(path)
    _resolve_splitter(splitter)
    check_group_by(group_by)
    episodes: list[Episode] = []
    first_line: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            line = _Line(path, line_no)
            episode = line.episode(raw, chunk_size, chunk_overlap, splitter)
            if episode.id in first_line:
                raise line.fail(f"id {episode.id!r} already used on line {first_line[episode.id]}")
            first_line[episode.id] = line_no
            episodes.append(episode)
    if not episodes:
        raise CustomFormatError(
            f"{path}: no questions: the file is empty or holds only blank lines; write one JSON "
            "object per line (question, chunks or documents, support): training/DATA_FORMAT.md"
        )
    assign_split_keys(episodes, group_by)
    return episodes
