"""Embedding a corpus too big for memory: in shards, on disk, resumable.

:func:`embed_corpus` reads an iterable of chunk texts (never all of them at once: at most one
shard of ``shard_rows`` texts and their embeddings are held), embeds each shard with the chunk
encoder and writes it to a cache folder ``<root>/<name>-<chunk encoder fingerprint>``::

    stream.json                  manifest: encoder fingerprint and settings, per shard its file,
                                 row count and SHA-256 of its texts and of its ids
    shard-000000.safetensors     float32 embeddings (rows, D); the chunk ids in its header

Every file is written to a scratch name and renamed into place, the shard before the manifest
entry that lists it, so a killed run leaves complete shards only; run it again with the same
corpus and it continues after the last listed shard. A corpus whose texts differ from the listed
shards is refused (:class:`CorpusChangedError`), and so is a folder holding files this module
did not write. Nothing is ever deleted.

:func:`read_shards` yields the shards back (checked: a damaged one raises
:class:`StreamCacheError` naming its file), to be added to a
:class:`~qrag_integrations.core.index.ChunkIndex` (``index.add(texts, shard.embeddings, ids=shard.ids)``)
or written to a store with :func:`qrag_integrations.ingest.sharded_store.write_shards`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from qrag_integrations.core.atomic import FILE_MODE, write_json_atomic
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.manifests import read_manifest_file
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.ingest.heap import release_freed_memory
from qrag_integrations.stores.rows import model_fingerprint

FORMAT = "qrag-embedding-stream"
FORMAT_VERSION = 1
MANIFEST = "stream.json"
TENSOR = "embeddings"
KEY_CHARS = 24
_SHARD = re.compile(r"^shard-\d{6}\.safetensors$")
#: Scratch files of an interrupted write (``write_json_atomic`` and :func:`_write_shard`).
_SCRATCH = re.compile(r"^\.(stream\.json|shard-\d{6}\.safetensors)\.tmp-[0-9a-f]{8}$")


class StreamCacheError(QRAGError):
    """A stream cache folder or shard that cannot be trusted (its path is in the message)."""


class CorpusChangedError(StreamCacheError):
    """The corpus given to :func:`embed_corpus` differs from the one its cache folder holds."""


@dataclass(frozen=True)
class Shard:
    """One shard of a stream cache."""

    index: int
    """Position of the shard (0-based)."""
    start: int
    """Corpus row of its first chunk."""
    ids: list[str]
    """Chunk ids, one per row."""
    embeddings: torch.Tensor
    """``(rows, D)`` float32 chunk embeddings (CPU)."""
    texts_sha256: str
    """SHA-256 of its texts (see :func:`texts_digest`)."""
    path: Path
    """Its file."""


@dataclass(frozen=True)
class StreamResult:
    """What :func:`embed_corpus` did."""

    folder: Path
    """The cache folder."""
    rows: int
    """Chunks in the corpus (all embedded now)."""
    shards: int
    """Shards in the folder."""
    embedded_rows: int
    """Chunks embedded by this call (the others were in shards of an earlier, interrupted call)."""


def texts_digest(texts: Iterable[str]) -> str:
    """SHA-256 over texts in order, each length-prefixed (no two lists collide)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _backend_tag(model: QRAGModel) -> str | None:
    """``"onnx-int8"``, ``"torch-bf16"``, ...: the inference backend, ``None`` for torch float32
    (the setting of every stream written before backends existed, so their keys stay valid)."""
    backend, quantize = model.inference_backend
    if (backend, quantize) == ("torch", None):
        return None
    return backend if quantize is None else f"{backend}-{quantize}"


def embedding_settings(model: QRAGModel) -> dict[str, Any]:
    """What the chunk embeddings depend on besides the weights."""
    enc = model.chunk_encoder
    settings = {
        "max_chunk_tokens": model.config.max_chunk_tokens,
        "output_scale": float(enc.output_scale),
        "normalize": bool(enc.normalize),
        "dim": model.embedding_dim,
    }
    tag = _backend_tag(model)
    return settings if tag is None else {**settings, "inference_backend": tag}


def cache_folder(root: str | os.PathLike[str], model: QRAGModel, name: str = "corpus") -> Path:
    """``<root>/<name>-<first 24 hex of the chunk encoder's fingerprint>``, with
    ``-<backend>[-<quantize>]`` after it when the model encodes with another inference backend
    than torch float32 (:meth:`QRAGModel.set_backend`): its embeddings differ slightly."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name.startswith("."):
        raise QRAGError(
            f"name must be letters, digits, '.', '_' or '-' (not starting with '.'), got {name!r}"
        )
    tag = _backend_tag(model)
    key = model_fingerprint(model)[:KEY_CHARS] + ("" if tag is None else f"-{tag}")
    return Path(root) / f"{name}-{key}"


def shard_file(index: int) -> str:
    """File name of shard ``index``."""
    return f"shard-{index:06d}.safetensors"


def _check_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise StreamCacheError(f"{folder} is not a folder")
    if not folder.is_dir():
        return
    foreign = sorted(
        p.name
        for p in folder.iterdir()
        if p.name != MANIFEST and not _SHARD.match(p.name) and not _SCRATCH.match(p.name)
    )
    if foreign:
        raise StreamCacheError(
            f"{folder} holds files that are not an embedding stream's: {foreign[:5]}; "
            "choose another root or name"
        )


def _read_manifest(folder: Path, model: QRAGModel | None) -> dict[str, Any]:
    manifest = read_manifest_file(
        folder, MANIFEST, FORMAT, FORMAT_VERSION, "embedding stream cache", error=StreamCacheError
    )
    if not isinstance(manifest.get("shards"), list) or not isinstance(
        manifest.get("shard_rows"), int
    ):
        raise StreamCacheError(f"{folder / MANIFEST}: no shard list")
    if model is not None:
        expected = {
            "chunk_encoder_fingerprint": model_fingerprint(model),
            "settings": embedding_settings(model),
        }
        wrong = {k: manifest.get(k) for k, v in expected.items() if manifest.get(k) != v}
        if wrong:
            raise StreamCacheError(
                f"{folder / MANIFEST} was written by another chunk encoder or settings: {wrong}"
            )
    return manifest


def _header(path: Path) -> tuple[tuple[int, ...], list[str]]:
    """Shape of the embeddings and the ids of a shard file, from its header."""
    try:
        with safe_open(str(path), framework="pt") as fh:
            ids = json.loads((fh.metadata() or {}).get("ids", "null"))
            return tuple(fh.get_slice(TENSOR).get_shape()), ids
    except (SafetensorError, OSError, json.JSONDecodeError, KeyError) as exc:
        raise StreamCacheError(f"damaged shard {path}: {exc}") from exc


def _check_shard(folder: Path, entry: dict[str, Any], dim: int) -> tuple[Path, list[str]]:
    path = folder / str(entry.get("file"))
    if not _SHARD.match(path.name) or not path.is_file():
        raise StreamCacheError(f"damaged stream cache: shard {path} is missing")
    shape, ids = _header(path)
    if shape != (entry["rows"], dim) or not isinstance(ids, list) or len(ids) != entry["rows"]:
        raise StreamCacheError(
            f"damaged shard {path}: holds {shape} and {len(ids or [])} ids, "
            f"its manifest entry says {entry['rows']} rows of {dim}"
        )
    if texts_digest(ids) != entry["ids_sha256"]:
        raise StreamCacheError(f"damaged shard {path}: its ids do not match its manifest entry")
    return path, ids


def _write_shard(path: Path, emb: torch.Tensor, ids: Sequence[str]) -> None:
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    save_file({TENSOR: emb.contiguous()}, str(tmp), metadata={"ids": json.dumps(list(ids))})
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    tmp.chmod(FILE_MODE)
    os.replace(tmp, path)


def _pieces(
    texts: Iterable[str], ids: Iterable[str] | None, size: int
) -> Iterator[tuple[list[str], list[str]]]:
    """``(texts, ids)`` lists of ``size`` rows (the last may be shorter), read lazily."""
    rows = iter(texts)
    names = iter(ids) if ids is not None else (str(i) for i in itertools.count())
    while True:
        piece = list(itertools.islice(rows, size))
        if not piece:
            return
        keys = [str(k) for k in itertools.islice(names, len(piece))]
        if len(keys) != len(piece):
            raise QRAGError(f"ids ran out before the texts (at a shard of {len(piece)} texts)")
        yield piece, keys


def embed_corpus(
    model: QRAGModel,
    texts: Iterable[str],
    root: str | os.PathLike[str],
    name: str = "corpus",
    ids: Iterable[str] | None = None,
    shard_rows: int = 4096,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> StreamResult:
    """Embed ``texts`` with the chunk encoder into shards under ``root``, resuming an interrupted run.

    Args:
        model: the Q-RAG model whose chunk encoder embeds (and whose fingerprint keys the folder).
        texts: chunk texts, read once and in order (a generator is fine).
        root: folder of stream caches; this corpus goes to :func:`cache_folder` ``(root, model, name)``.
        name: the corpus's name (one folder per name and encoder).
        ids: chunk ids, one per text, read alongside; default: the row numbers ``"0"``, ``"1"``, ...
            They should be unique over the corpus (not checked across shards, to keep memory
            bounded: a repeated id overwrites the earlier point when written to a store).
        shard_rows: texts per shard: the memory bound (texts plus ``shard_rows x D`` floats) and the
            work lost by an interruption. A resumed run must use the value of the first.
        batch_size: chunks per forward pass.
        progress: called after every shard with ``(rows done, shards done)``.

    Returns:
        The folder, its row and shard counts and how many rows this call embedded.

    Raises:
        CorpusChangedError: ``texts`` or ``ids`` differ from those of the shards already there.
        StreamCacheError: the folder holds other files, was written with other settings or another
            encoder, or a listed shard is missing or damaged (its path is named).
    """
    if shard_rows < 1 or batch_size < 1:
        raise QRAGError(
            f"shard_rows and batch_size must be >= 1, got {shard_rows} and {batch_size}"
        )
    folder = cache_folder(root, model, name)
    _check_folder(folder)
    if (folder / MANIFEST).exists():
        manifest = _read_manifest(folder, model)
        if manifest["shard_rows"] != shard_rows:
            raise StreamCacheError(
                f"{folder} was written with shard_rows={manifest['shard_rows']}; "
                f"resume it with that value (got {shard_rows})"
            )
    else:
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "chunk_encoder_fingerprint": model_fingerprint(model),
            "settings": embedding_settings(model),
            "shard_rows": shard_rows,
            "complete": False,
            "rows": 0,
            "shards": [],
        }
    folder.mkdir(parents=True, exist_ok=True)
    done: list[dict[str, Any]] = manifest["shards"]
    rows = embedded = count = 0
    for count, (piece, keys) in enumerate(_pieces(texts, ids, shard_rows), start=1):
        index = count - 1
        where = f"shard {index} (corpus rows {rows}-{rows + len(piece) - 1})"
        if index < len(done):
            entry = done[index]
            if (texts_digest(piece), texts_digest(keys)) != (
                entry["texts_sha256"],
                entry["ids_sha256"],
            ):
                raise CorpusChangedError(
                    f"the corpus differs from the one cached in {folder} at {where}; "
                    "give it another name (or move the folder away)"
                )
            _check_shard(folder, entry, model.embedding_dim)
        else:
            if manifest["complete"]:
                raise CorpusChangedError(
                    f"the corpus is longer than the one cached in {folder} ({rows} rows)"
                )
            emb = model.embed_chunks(piece, batch_size=batch_size, out_dtype=torch.float32).cpu()
            _write_shard(folder / shard_file(index), emb, keys)
            done.append(
                {
                    "file": shard_file(index),
                    "start": rows,
                    "rows": len(piece),
                    "texts_sha256": texts_digest(piece),
                    "ids_sha256": texts_digest(keys),
                }
            )
            manifest["rows"] = rows + len(piece)
            write_json_atomic(folder / MANIFEST, manifest)
            embedded += len(piece)
            del emb
            release_freed_memory()
        rows += len(piece)
        if progress is not None:
            progress(rows, count)
    if count < len(done):
        raise CorpusChangedError(
            f"the corpus ({rows} rows) is shorter than the one cached in {folder} "
            f"({manifest['rows']} rows in {len(done)} shards)"
        )
    if not manifest["complete"]:
        manifest.update(complete=True, rows=rows)
        write_json_atomic(folder / MANIFEST, manifest)
    return StreamResult(folder, rows, len(done), embedded)


def read_shards(
    folder: str | os.PathLike[str], model: QRAGModel | None = None, require_complete: bool = True
) -> Iterator[Shard]:
    """Yield the shards of a stream cache folder one at a time, each checked.

    Args:
        folder: a folder :func:`embed_corpus` wrote (its ``StreamResult.folder``).
        model: if given, the folder must hold this chunk encoder's embeddings.
        require_complete: refuse a folder whose corpus was not embedded to the end.

    Raises:
        StreamCacheError: missing or foreign manifest, another encoder, an incomplete run, or a
            damaged shard (wrong shape, ids, dtype or non-finite values; its path is named).
    """
    folder = Path(folder)
    _check_folder(folder)
    manifest = _read_manifest(folder, model)
    if require_complete and not manifest.get("complete"):
        raise StreamCacheError(
            f"{folder} holds an interrupted run ({manifest.get('rows')} rows so far); "
            "run embed_corpus again to finish it"
        )
    dim = int(manifest["settings"]["dim"])
    start = 0
    for index, entry in enumerate(manifest["shards"]):
        path, ids = _check_shard(folder, entry, dim)
        try:
            with safe_open(str(path), framework="pt") as fh:
                emb = fh.get_tensor(TENSOR)
        except (SafetensorError, OSError) as exc:
            raise StreamCacheError(f"damaged shard {path}: {exc}") from exc
        if emb.dtype != torch.float32 or not bool(torch.isfinite(emb).all()):
            raise StreamCacheError(f"damaged shard {path}: not finite float32 (dtype {emb.dtype})")
        yield Shard(index, start, ids, emb, entry["texts_sha256"], path)
        start += len(ids)
