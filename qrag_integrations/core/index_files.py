"""The saved form of a chunk index: a folder of ``index.json`` (manifest), embeddings as
safetensors and records as JSON lines, written atomically and read back without pickle."""

from __future__ import annotations

import contextvars
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from qrag_integrations.core import validation
from qrag_integrations.core.atomic import SaveKind, atomic_dir
from qrag_integrations.core.chunks import Chunk, Snapshot
from qrag_integrations.core.digests import seal, verify_files
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.manifests import read_manifest_file, safetensors_shapes

INDEX_FORMAT = "qrag-index"
INDEX_FORMAT_VERSION = 1
MANIFEST_FILE = "index.json"
#: Embedding storage dtypes an index accepts, by the name saved in its manifest.
INDEX_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
EMBEDDINGS_FILE = "embeddings.safetensors"
RECORDS_FILE = "records.jsonl"
#: A saved index folder: what :meth:`ChunkIndex.save` may replace.
INDEX_SAVE = SaveKind(
    "saved index",
    frozenset({MANIFEST_FILE, EMBEDDINGS_FILE, RECORDS_FILE}),
    MANIFEST_FILE,
    INDEX_FORMAT,
)
#: What to do about a damaged saved index, for error messages.
INDEX_FIX = "rebuild the index from your texts (or restore the folder from a backup)"
#: Deepest metadata nesting a save accepts.
MAX_METADATA_DEPTH = 64


def _json_problem(value: Any, where: str, depth: int = 0) -> str | None:
    """Why ``value`` would not load back from JSON unchanged (``where`` names it), or ``None``."""
    if depth > MAX_METADATA_DEPTH:
        return f"{where} is nested deeper than {MAX_METADATA_DEPTH} levels"
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        bad_key = next((k for k in value if not isinstance(k, str)), None)
        if bad_key is not None:
            return f"{where} has a key that is not a string: {bad_key!r}"
        items = ((f"{where}[{k!r}]", v) for k, v in value.items())
    else:
        return f"{where} is a {type(value).__name__}"
    return next((p for w, v in items if (p := _json_problem(v, w, depth + 1))), None)


def read_index_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``index.json`` of a saved index, checked."""
    return read_manifest_file(
        Path(path), MANIFEST_FILE, INDEX_FORMAT, INDEX_FORMAT_VERSION, "saved index", fix=INDEX_FIX
    )


def write_index_folder(
    path: str | os.PathLike[str],
    snap: Snapshot,
    manifest: dict[str, Any],
    overwrite: bool = False,
) -> None:
    """Write ``snap`` and ``manifest`` (format fields are added) as an index folder, atomically.

    Raises:
        QRAGError: a metadata value would not load back as it is, a text is not valid Unicode,
            or something that is not a saved index is at ``path``; nothing is written.
    """
    validation.check_path(path)
    manifest = {"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION, **manifest}
    for c in snap.chunks:
        problem = _json_problem(c.metadata, "metadata")
        if problem:
            raise QRAGError(
                "chunk metadata must be JSON-serialisable to save the index (dicts with string "
                f"keys, lists, str, int, float, bool, None load back as saved): chunk {c.id!r} {problem}"
            )
    lines = [
        json.dumps(
            {
                "id": c.id,
                "text": c.text,
                "metadata": c.metadata,
                "doc_id": c.doc_id,
                "order": c.order,
            },
            ensure_ascii=False,
        )
        for c in snap.chunks
    ]
    try:
        records = "".join(line + "\n" for line in lines).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QRAGError(
            f"cannot save the index: a text, id or metadata string is not valid Unicode ({exc})"
        ) from exc
    with atomic_dir(path, INDEX_SAVE, overwrite=overwrite) as tmp:
        save_file(
            {"embeddings": snap.embeddings.detach().to("cpu").contiguous()},
            str(tmp / EMBEDDINGS_FILE),
        )
        (tmp / RECORDS_FILE).write_bytes(records)
        manifest = seal(manifest, tmp, [EMBEDDINGS_FILE, RECORDS_FILE])
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class IndexFolder:
    """What a saved index folder holds, checked."""

    embedding_dim: int
    dtype: torch.dtype
    chunks: tuple[Chunk, ...]
    embeddings: torch.Tensor
    """``(N, D)`` on the CPU, in the saved dtype."""
    doc_rank: dict[str, int]


def read_index_folder(path: str | os.PathLike[str], expected_dim: int | None = None) -> IndexFolder:
    """Read an index folder written by :func:`write_index_folder` (no pickle).

    Raises:
        IndexMismatchError: embedding size differs from ``expected_dim``.
        QRAGError: missing or corrupt files.
    """
    validation.check_path(path)
    path = Path(path)
    manifest = read_index_manifest(path)
    try:
        dim = int(manifest["embedding_dim"])
        dtype = INDEX_DTYPES[manifest.get("dtype", "float32")]
    except (KeyError, TypeError, ValueError) as exc:
        raise QRAGError(f"corrupt {path / MANIFEST_FILE}: bad or missing {exc}") from exc
    if expected_dim is not None and dim != expected_dim:
        raise IndexMismatchError(
            f"the index at {path} holds {dim}-dimensional embeddings but the model makes "
            f"{expected_dim}-dimensional ones; rebuild the index with this model"
        )
    # The digests are checked in a thread while the files are parsed (hashing releases the GIL,
    # so a load costs little more than without them); a damaged file is the error reported,
    # also where parsing it failed first. In a copy of this context: a retriever's load collects
    # the warning about a save without digests (digests.collect_undigested).
    with ThreadPoolExecutor(1) as pool:
        verified = pool.submit(
            contextvars.copy_context().run, verify_files, path, manifest, MANIFEST_FILE, INDEX_FIX
        )
        try:
            folder = _read_files(path, manifest, dim, dtype)
        except QRAGError:
            verified.result()
            raise
        verified.result()
    return folder


def _read_files(path: Path, manifest: dict[str, Any], dim: int, dtype: torch.dtype) -> IndexFolder:
    """The embeddings and records of an index folder, checked against its manifest."""
    # The header first: the manifest and the file must agree before anything is read in.
    shapes = safetensors_shapes(path / EMBEDDINGS_FILE)
    if shapes != {"embeddings": (manifest.get("size"), dim)}:
        raise QRAGError(
            f"{path / EMBEDDINGS_FILE} holds {shapes}, but "
            f"{path / MANIFEST_FILE} says embeddings of shape ({manifest.get('size')}, {dim})"
        )
    try:
        emb = load_file(str(path / EMBEDDINGS_FILE))["embeddings"]
    except Exception as exc:
        raise QRAGError(f"corrupt {path / EMBEDDINGS_FILE}: {exc}") from exc
    try:
        # split("\n"), not splitlines(): texts are written unescaped, and splitlines() also
        # breaks at characters such as U+0085 and U+2028 inside them
        lines = (path / RECORDS_FILE).read_text(encoding="utf-8").split("\n")
        records = [json.loads(line) for line in lines if line]
        chunks = tuple(
            Chunk(
                str(r["id"]),
                r["text"],
                dict(r.get("metadata") or {}),
                str(r["doc_id"]),
                int(r["order"]),
            )
            for r in records
        )
    except FileNotFoundError as exc:
        raise QRAGError(f"{path / RECORDS_FILE} is missing") from exc
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise QRAGError(f"corrupt {path / RECORDS_FILE}: {exc!r}") from exc
    if emb.shape != (len(records), dim) or len(records) != manifest.get("size"):
        raise QRAGError(
            f"{path}: {len(records)} records, embeddings {tuple(emb.shape)}, manifest size "
            f"{manifest.get('size')} do not agree"
        )
    try:
        doc_rank = {str(k): int(v) for k, v in manifest.get("doc_rank", {}).items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise QRAGError(f"corrupt {path / MANIFEST_FILE}: bad doc_rank ({exc})") from exc
    return IndexFolder(dim, dtype, chunks, emb, doc_rank)
