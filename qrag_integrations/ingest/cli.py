"""``qrag-embed``: embed a corpus file in resumable shards, and optionally write them to Qdrant.

The command form of :func:`~qrag_integrations.ingest.sharded.embed_corpus` and
:func:`~qrag_integrations.ingest.sharded_store.write_shards`::

    qrag-embed corpus.jsonl --cache emb-cache --qdrant-path qdrant-data

The corpus is a ``.txt`` file (one chunk per line; blank lines are skipped; the ids are the row
numbers ``"0"``, ``"1"``, ... counting the kept lines; every chunk is in one document named after
the corpus) or a ``.jsonl`` file (one JSON object per non-blank line: ``text``, a non-empty
string; optional ``id`` and ``doc_id``, strings or integers; a missing ``id`` is the row number, a
missing ``doc_id`` the corpus name; positions are laid out per document). The file is read
lazily, once to count its rows, once to embed and, for a store, once more to write (each shard's
texts are checked against the cache). Running the same command again resumes either pass.

``--backend onnx|openvino`` / ``--quantize bf16|int8`` embed with a faster inference backend
(``QRAGModel.set_backend``); such a stream gets its own cache folder (``-onnx-int8``, ...) and
manifest setting, and a retriever reading it should use the same backend.

Bad input ends with one line on stderr and exit code 2. ``qdrant-client`` is imported only when
a Qdrant option is given.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, NoReturn

import torch

from qrag_integrations.cli_backend import (
    add_backend_arguments,
    add_threads_argument,
    apply_backend,
    apply_threads,
    backend_summary,
)
from qrag_integrations.cli_errors import fail
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.progress import Progress, progress_bar
from qrag_integrations.ingest.sharded import Shard, embed_corpus, read_shards
from qrag_integrations.ingest.sharded_store import write_shards

PROG = "qrag-embed"
#: Corpus file suffixes (lower case) and whether the file is JSON lines.
SUFFIXES = {".txt": False, ".jsonl": True}
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


class CorpusFormatError(QRAGError):
    """A line of a corpus file that is not a chunk (the file and line number are in the message)."""


@dataclass(frozen=True)
class Row:
    """One chunk of a corpus file."""

    text: str
    """The chunk's text."""
    id: str
    """Its chunk id."""
    doc_id: str
    """Its document."""


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line without its line break)`` of the non-blank lines of a UTF-8 file."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusFormatError(f"{path} line {number}: not UTF-8 ({exc.reason})") from exc
            yield number, line.removesuffix("\n").removesuffix("\r")


def _key(obj: dict[str, Any], key: str, where: str) -> str | None:
    """``obj[key]`` as a string, ``None`` when it is missing or null."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise CorpusFormatError(
            f'{where}: "{key}" must be a non-empty string or an integer, got {value!r}'
        )
    return str(value)


def _json_row(line: str, where: str) -> tuple[str, str | None, str | None]:
    """``(text, id, doc_id)`` of a JSON line."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusFormatError(f"{where}: not valid JSON ({exc.msg})") from exc
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        raise CorpusFormatError(f'{where}: expected a JSON object with a string "text"')
    if not obj["text"].strip():
        raise CorpusFormatError(f'{where}: "text" is empty')
    return obj["text"], _key(obj, "id", where), _key(obj, "doc_id", where)


def read_rows(path: str | Path, default_doc: str) -> Iterator[Row]:
    """The chunks of a ``.txt`` or ``.jsonl`` corpus file, read lazily (see the module docstring).

    Args:
        path: the corpus file.
        default_doc: document of the chunks that name none (all of a ``.txt`` file's).

    Yields:
        One :class:`Row` per non-blank line.

    Raises:
        CorpusFormatError: a line that is not UTF-8, or a JSON line that is not an object with a
            non-empty string ``text`` (or has a bad ``id`` / ``doc_id``); its number is named.
        QRAGError: an unknown suffix.
    """
    path = Path(path)
    jsonl = corpus_kind(path)
    for row, (number, line) in enumerate(_lines(path)):
        text, chunk_id, doc_id = (
            _json_row(line, f"{path} line {number}") if jsonl else (line, None, None)
        )
        yield Row(text, str(row) if chunk_id is None else chunk_id, doc_id or default_doc)


def corpus_kind(path: Path) -> bool:
    """Whether ``path`` is JSON lines (``.jsonl``) rather than plain text (``.txt``).

    Raises:
        QRAGError: another suffix.
    """
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise QRAGError(
            f"{path}: unknown corpus suffix {path.suffix!r}; use .txt (one chunk per line) or .jsonl "
            "(one JSON object per line)"
        )
    return kind


def count_rows(path: Path) -> int:
    """Non-blank lines of ``path`` (the rows of a well-formed corpus), read lazily."""
    with open(path, "rb") as fh:
        return sum(1 for raw in fh if raw.strip())


def _columns(rows: Iterable[Row], *fields: str) -> tuple[Iterator[Any], ...]:
    """One iterator per field over the same rows (read alongside: ``tee`` holds at most the rows
    one column is ahead of the others, one shard in ``embed_corpus`` and ``write_shards``)."""
    return tuple(
        map(attrgetter(field), it) for it, field in zip(itertools.tee(rows, len(fields)), fields)
    )


def default_name(path: Path) -> str:
    """A cache name from a corpus file name: its stem with characters other than letters, digits,
    ``.``, ``_`` and ``-`` replaced by ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).lstrip(".") or "corpus"


def _advancing(shards: Iterable[Shard], bar: Progress) -> Iterator[Shard]:
    """``shards``, moving ``bar`` by the rows of the shard before each next one (and the last)."""
    rows = 0
    for shard in shards:
        bar.update(rows)
        rows = len(shard.ids)
        yield shard
    bar.update(rows)


def _positive(value: str) -> int:
    """An argparse type: an integer >= 1."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def _device(value: str) -> str:
    """An argparse type: ``cpu``, ``cuda`` or ``cuda:N``."""
    if not _DEVICE.match(value):
        raise argparse.ArgumentTypeError(f"must be cpu, cuda or cuda:N, got {value!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``qrag-embed`` argument parser."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Embed a corpus file in resumable shards, and optionally write them to Qdrant.",
    )
    p.add_argument(
        "corpus",
        type=Path,
        help='.txt (one chunk per line) or .jsonl ({"text", "id", "doc_id"} per line)',
    )
    p.add_argument(
        "--cache",
        type=Path,
        required=True,
        metavar="DIR",
        help="folder of stream caches (the shards go to a subfolder)",
    )
    p.add_argument(
        "--name", help="corpus name: the cache subfolder's prefix (default: the file's stem)"
    )
    p.add_argument(
        "--checkpoint",
        metavar="CKPT",
        help="checkpoint folder, packaged:NAME or HF encoder (default: the retriever's default model)",
    )
    p.add_argument(
        "--shard-rows",
        type=_positive,
        default=4096,
        metavar="N",
        help="chunks per shard (default 4096; keep it when resuming)",
    )
    p.add_argument(
        "--batch-size",
        type=_positive,
        default=64,
        metavar="N",
        help="chunks per forward pass (default 64)",
    )
    add_threads_argument(p)
    p.add_argument("--device", type=_device, default="cpu", help="cpu (default), cuda or cuda:N")
    # a backend other than torch float32 is named in the stream's folder and manifest
    add_backend_arguments(p)
    store = p.add_mutually_exclusive_group()
    store.add_argument(
        "--qdrant-path",
        metavar="PATH",
        help="then write the shards to embedded (local) Qdrant in this folder",
    )
    store.add_argument(
        "--qdrant-url", metavar="URL", help="then write the shards to the Qdrant server at this URL"
    )
    p.add_argument("--collection", metavar="NAME", help="Qdrant collection (default: the name)")
    return p


def _fail(message: str) -> NoReturn:
    """Print ``qrag-embed: error: message`` to stderr and exit with code 2."""
    fail(PROG, message)


def _check(args: argparse.Namespace) -> None:
    """Refuse what can be refused before the model is loaded."""
    if args.collection is not None and args.qdrant_path is None and args.qdrant_url is None:
        raise QRAGError("--collection needs --qdrant-path or --qdrant-url")
    if not args.corpus.exists():
        raise QRAGError(f"corpus file {args.corpus} does not exist")
    if not args.corpus.is_file():
        raise QRAGError(f"corpus {args.corpus} is not a file")
    corpus_kind(args.corpus)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise QRAGError(f"--device {args.device}: no CUDA device here")


def embed(args: argparse.Namespace, model: QRAGModel, name: str, total: int) -> dict[str, Any]:
    """The embedding pass; returns its summary."""
    start = time.perf_counter()
    texts, ids = _columns(read_rows(args.corpus, name), "text", "id")
    with progress_bar(total, "embedding") as bar:
        result = embed_corpus(
            model,
            texts,
            args.cache,
            name=name,
            ids=ids,
            shard_rows=args.shard_rows,
            batch_size=args.batch_size,
            progress=lambda rows, _: bar.update(rows - bar.n),
        )
    return {
        "folder": str(result.folder),
        "rows": result.rows,
        "shards": result.shards,
        "embedded_now": result.embedded_rows,
        "seconds": round(time.perf_counter() - start, 2),
        **backend_summary(model),
    }


def write_store(
    args: argparse.Namespace, model: QRAGModel, name: str, folder: str, total: int
) -> dict[str, Any]:
    """The store pass: the cache's shards into the Qdrant collection; returns its summary."""
    try:
        from qdrant_client.http.exceptions import ApiException

        from qrag_integrations.stores.qdrant import QdrantSource, connect
    except ImportError as exc:
        raise QRAGError(
            f"writing to Qdrant needs qdrant-client: pip install 'qrag-integrations[stores]' "
            f"({exc})"
        ) from exc
    start = time.perf_counter()
    collection, where = args.collection or name, f"Qdrant at {args.qdrant_path or args.qdrant_url}"
    client = connect(url=args.qdrant_url, path=args.qdrant_path)
    try:
        source = QdrantSource(client, collection, model)
        texts, docs = _columns(read_rows(args.corpus, name), "text", "doc_id")
        with progress_bar(total, "writing") as bar:
            written = write_shards(
                source, _advancing(read_shards(folder, model), bar), texts, doc_ids=docs
            )
        points = source.count()
    except ApiException as exc:
        raise QRAGError(f"{where}: {exc}") from exc
    finally:
        client.close()
    return {
        "collection": collection,
        "written_now": written,
        "points": points,
        "seconds": round(time.perf_counter() - start, 2),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``qrag-embed``: print one JSON line per pass (embedding, then the store if asked).

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Raises:
        SystemExit: code 2 on bad input (one line on stderr), 130 when interrupted.
    """
    args = build_parser().parse_args(argv)
    try:
        _check(args)
        name = args.name or default_name(args.corpus)
        apply_threads(args)
        model = apply_backend(load_model(args.checkpoint, device=args.device), args)
        total = count_rows(args.corpus)
        summary = embed(args, model, name, total)
        print(json.dumps(summary), flush=True)
        if args.qdrant_path is not None or args.qdrant_url is not None:
            print(json.dumps(write_store(args, model, name, summary["folder"], total)), flush=True)
    except (QRAGError, OSError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; run the same command again to resume", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
