"""Raw documents in: a folder of text / Markdown files, a JSONL file, framework documents.

Every source becomes :class:`SourceDocument` records (an id, an optional title, the text). The id
decides a document's side of the trainer's train / held-out split, so it must be stable: a file's
path relative to the folder, a JSONL record's ``id``, a framework document's id, else a hash of
the text.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qrag_training.questions.errors import QuestionGenerationError

#: File suffixes read from a folder.
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class SourceDocument:
    """One raw document."""

    id: str
    """Stable id: the document's side of the train / held-out split hangs on it."""
    text: str
    """The whole text."""
    title: str | None = None
    """A title (a Markdown heading, a JSONL ``title``, framework metadata), when known."""


def text_id(text: str) -> str:
    """An id from the text alone (for records that carry none)."""
    return "sha1:" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def read_text_file(path: Path, root: Path) -> SourceDocument:
    """A text or Markdown file; its title is the first Markdown heading, else the file's stem."""
    text = path.read_text(encoding="utf-8", errors="replace")
    heading = _HEADING.search(text) if path.suffix.lower() in (".md", ".markdown") else None
    title = heading.group(1) if heading else path.stem.replace("_", " ")
    return SourceDocument(id=path.relative_to(root).as_posix(), text=text, title=title)


def read_jsonl(path: Path, text_key: str = "text") -> Iterator[SourceDocument]:
    """One document per line: ``{"id": ..., "title": ..., text_key: ...}`` (id, title optional).

    Raises:
        QuestionGenerationError: a line that is not a JSON object with a string ``text_key``.
    """
    with path.open(encoding="utf-8") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as err:
                raise QuestionGenerationError(f"{where}: invalid JSON: {err.msg}") from err
            if not isinstance(record, dict) or not isinstance(record.get(text_key), str):
                raise QuestionGenerationError(
                    f"{where}: expected a JSON object with a string {text_key!r} "
                    "(another key holds the text? pass --text-key)"
                )
            text = record[text_key]
            title = record.get("title")
            yield SourceDocument(
                id=str(record["id"]) if "id" in record else text_id(text),
                text=text,
                title=str(title) if title else None,
            )


def read_path(path: str | Path, text_key: str = "text") -> list[SourceDocument]:
    """The documents of a folder (text / Markdown files, recursively), a text file or a JSONL file.

    Raises:
        QuestionGenerationError: the path does not exist, or has no file of a known kind.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES
        )
        jsonl = sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in JSONL_SUFFIXES
        )
        docs = [read_text_file(p, path) for p in files]
        for p in jsonl:
            docs += read_jsonl(p, text_key)
        if not docs:
            raise QuestionGenerationError(
                f"{path}: no {', '.join(TEXT_SUFFIXES + JSONL_SUFFIXES)} file in this folder"
            )
        return docs
    if not path.is_file():
        raise QuestionGenerationError(f"{path}: no such file or folder")
    if path.suffix.lower() in JSONL_SUFFIXES:
        return list(read_jsonl(path, text_key))
    if path.suffix.lower() in TEXT_SUFFIXES:
        return [read_text_file(path, path.parent)]
    raise QuestionGenerationError(
        f"{path}: unknown kind of file; give a folder, a {'/'.join(TEXT_SUFFIXES)} file "
        f"or a {'/'.join(JSONL_SUFFIXES)} file"
    )


def _metadata_title(metadata: dict[str, Any]) -> str | None:
    for key in ("title", "file_name", "source"):
        if metadata.get(key):
            return str(metadata[key])
    return None


def as_source_document(item: Any, index: int) -> SourceDocument:
    """One item of a document collection as a :class:`SourceDocument`.

    Takes a :class:`SourceDocument`, a string, a dict with ``text`` (``id`` / ``title``
    optional), a LangChain ``Document`` (``page_content``, ``id``, ``metadata``) or a LlamaIndex
    document or node (``get_content()``, ``id_``, ``metadata``); read by attribute, so neither
    framework is imported here.

    Raises:
        QuestionGenerationError: an item of none of these kinds.
    """
    if isinstance(item, SourceDocument):
        return item
    if isinstance(item, str):
        return SourceDocument(id=text_id(item), text=item)
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        title = item.get("title")
        doc_id = str(item["id"]) if "id" in item else text_id(item["text"])
        return SourceDocument(id=doc_id, text=item["text"], title=str(title) if title else None)
    metadata = getattr(item, "metadata", None) or {}
    if isinstance(getattr(item, "page_content", None), str):  # LangChain Document
        text = item.page_content
        doc_id = getattr(item, "id", None) or metadata.get("id")
    elif callable(getattr(item, "get_content", None)):  # LlamaIndex Document / TextNode
        text = item.get_content()
        doc_id = getattr(item, "id_", None)
    else:
        raise QuestionGenerationError(
            f"document {index} is a {type(item).__name__}: give strings, dicts with 'text', "
            "LangChain Documents or LlamaIndex documents / nodes"
        )
    return SourceDocument(
        id=str(doc_id) if doc_id else text_id(text), text=text, title=_metadata_title(metadata)
    )


def as_source_documents(items: Iterable[Any]) -> list[SourceDocument]:
    """Every item of a collection as a :class:`SourceDocument` (:func:`as_source_document`)."""
    return [as_source_document(item, i) for i, item in enumerate(items)]


def call_loader(spec: str) -> list[SourceDocument]:
    """The documents a Python function returns: ``package.module:function`` (no arguments).

    Raises:
        QuestionGenerationError: the spec is malformed, the module or function is missing.
    """
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise QuestionGenerationError(f"loader must be 'package.module:function', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise QuestionGenerationError(
            f"loader {spec!r}: cannot import {module_name}: {err}"
        ) from err
    function: Callable[[], Iterable[Any]] | None = getattr(module, name, None)
    if not callable(function):
        raise QuestionGenerationError(f"loader {spec!r}: {module_name} has no function {name!r}")
    return as_source_documents(function())
