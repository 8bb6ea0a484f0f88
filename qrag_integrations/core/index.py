"""A chunk index: texts, metadata, document ids and order, and their chunk embeddings.

Rows are kept in *document order*: documents in the order they were first added, chunks of a
document by their ``order``. This global order is what Q-RAG's positions are laid out over.
Updates never modify arrays in place: ``add`` / ``delete`` build new arrays and swap them in
under a lock, so a search running in another thread sees one consistent snapshot.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from qrag_integrations.core.atomic import SaveKind, atomic_dir
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
#: Deepest metadata nesting a save accepts.
MAX_METADATA_DEPTH = 64

#: A metadata filter: ``{"key": value}`` (equality), ``{"key": [v1, v2]}`` (any of), or a callable.
MetadataFilter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable unit."""

    id: str
    """Unique id of the chunk."""
    text: str
    """Chunk text."""
    metadata: dict[str, Any]
    """User metadata (JSON-serialisable to be saved)."""
    doc_id: str
    """Id of the document the chunk comes from."""
    order: int
    """Position of the chunk inside its document."""


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of the index used by one search."""

    chunks: tuple[Chunk, ...]
    embeddings: torch.Tensor
    """``(N, D)`` unrotated chunk embeddings, rows in document order."""

    def __len__(self) -> int:
        return len(self.chunks)

    def rows_matching(self, filter: MetadataFilter | None) -> np.ndarray | None:
        """Rows (ascending, so still in document order) whose metadata pass ``filter``; ``None``
        means all rows."""
        if filter is None:
            return None
        test = filter if callable(filter) else mapping_filter(filter)
        return np.fromiter(
            (i for i, c in enumerate(self.chunks) if test(c.metadata)), dtype=np.int64
        )


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


def mapping_filter(filter: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """The test a ``{"key": value or [values]}`` filter stands for: every key present, its value
    equal to the value or to one of the values. The one definition every search path (in-memory
    and store-backed) checks chunks with.

    Raises:
        QRAGError: ``filter`` is not a mapping.
    """
    if not isinstance(filter, Mapping):
        raise QRAGError(f"filter must be a mapping or a callable, got {type(filter).__name__}")
    wanted = {
        k: (list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v])
        for k, v in filter.items()
    }

    def test(meta: Mapping[str, Any]) -> bool:
        return all(k in meta and meta[k] in values for k, values in wanted.items())

    return test


class ChunkIndex:
    """Chunks with their embeddings, in document order, safe to read while another thread writes."""

    def __init__(
        self,
        embedding_dim: int,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        """Create an empty index.

        Args:
            embedding_dim: size ``D`` of chunk embeddings.
            dtype: storage dtype of embeddings (``torch.float32``, ``torch.float16`` or
                ``torch.bfloat16``; see :data:`INDEX_DTYPES`).
            device: where embeddings live (``"cpu"``, ``"cuda"``...).
        """
        if dtype not in INDEX_DTYPES.values():
            raise QRAGError(f"index dtype must be float32, float16 or bfloat16, got {dtype}")
        self.embedding_dim = embedding_dim
        self.dtype = dtype
        self.device = torch.device(device)
        self._lock = threading.Lock()
        self._doc_rank: dict[str, int] = {}
        self._snapshot = Snapshot(
            (), torch.empty((0, embedding_dim), dtype=dtype, device=self.device)
        )
        self._row_of: dict[str, int] = {}

    # -- reading ------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The current consistent view (cheap: no copy)."""
        return self._snapshot

    def __len__(self) -> int:
        return len(self._snapshot)

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._row_of

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (unknown ids are skipped)."""
        snap, rows = self._snapshot, self._row_of
        return [snap.chunks[rows[i]] for i in ids if i in rows]

    @property
    def ids(self) -> list[str]:
        """Chunk ids in document order."""
        return [c.id for c in self._snapshot.chunks]

    def nbytes(self) -> int:
        """Bytes held by the search structures (embeddings + order keys), texts excluded."""
        snap = self._snapshot
        return snap.embeddings.element_size() * snap.embeddings.nelement() + 16 * len(snap)

    # -- writing ------------------------------------------------------------------------------
    def add(
        self,
        texts: Sequence[str],
        embeddings: torch.Tensor,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
        orders: Sequence[int] | None = None,
    ) -> list[str]:
        """Add chunks whose embeddings are already computed.

        Args:
            texts: chunk texts.
            embeddings: ``(len(texts), D)`` unrotated chunk embeddings.
            metadatas: one dict per chunk (default empty).
            ids: unique chunk ids (default: random UUIDs); an id already present is an error.
            doc_ids: document of each chunk (default: one new document per call).
            orders: order of each chunk inside its document (default: running count per document).

        Returns:
            The ids of the added chunks.
        """
        n = len(texts)
        self.check_new(n, metadatas)  # metadata kinds, before they are copied
        metadatas = (
            [dict(m or {}) for m in metadatas] if metadatas is not None else [{} for _ in range(n)]
        )
        ids = [str(i) for i in ids] if ids is not None else [uuid.uuid4().hex for _ in range(n)]
        if embeddings.shape != (n, self.embedding_dim):
            raise IndexMismatchError(
                f"expected embeddings of shape ({n}, {self.embedding_dim}), got {tuple(embeddings.shape)}"
            )
        with self._lock:
            self.check_new(n, metadatas, ids)
            if doc_ids is None:
                doc_ids = [f"doc-{uuid.uuid4().hex}"] * n
            doc_ids = [str(d) for d in doc_ids]
            if len(doc_ids) != n:
                raise QRAGError(f"doc_ids has {len(doc_ids)} entries for {n} texts")
            old = self._snapshot
            if orders is None:
                counts: dict[str, int] = {}
                for c in old.chunks:
                    counts[c.doc_id] = max(counts.get(c.doc_id, 0), c.order + 1)
                orders_list = []
                for d in doc_ids:
                    orders_list.append(counts.get(d, 0))
                    counts[d] = orders_list[-1] + 1
            else:
                orders_list = [int(o) for o in orders]
                if len(orders_list) != n:
                    raise QRAGError(f"orders has {len(orders_list)} entries for {n} texts")
            for d in doc_ids:
                self._doc_rank.setdefault(d, len(self._doc_rank))
            new = [
                Chunk(i, t, m, d, o)
                for i, t, m, d, o in zip(ids, texts, metadatas, doc_ids, orders_list)
            ]
            chunks = list(old.chunks) + new
            emb = torch.cat([old.embeddings, embeddings.to(self.device, self.dtype)])
            keys = [(self._doc_rank[c.doc_id], c.order) for c in chunks]
            if any(keys[i] > keys[i + 1] for i in range(len(keys) - 1)):
                perm = sorted(range(len(chunks)), key=keys.__getitem__)
                chunks = [chunks[i] for i in perm]
                emb = emb[torch.tensor(perm, device=self.device)]
            self._swap(Snapshot(tuple(chunks), emb))
        return ids

    def check_new(
        self, n: int, metadatas: Sequence[Any] | None = None, ids: Sequence[str] | None = None
    ) -> None:
        """Raise :class:`QRAGError` if ``n`` new chunks with these metadatas / ids cannot be added
        (wrong lengths, repeated ids, ids already present). Callers use it to fail before the
        costly embedding; :meth:`add` checks again under its lock.
        """
        for name, seq in (("metadatas", metadatas), ("ids", ids)):
            if seq is not None and len(seq) != n:
                raise QRAGError(f"{name} has {len(seq)} entries for {n} texts")
        bad = next(
            (
                i
                for i, m in enumerate(metadatas or ())
                if m is not None and not isinstance(m, Mapping)
            ),
            None,
        )
        if bad is not None:
            raise QRAGError(
                f"metadata must be a dict per text; item {bad} is {type(metadatas[bad]).__name__}"
            )
        if ids is None:
            return
        if len(set(ids)) != n:
            raise QRAGError("ids must be unique")
        clash = [i for i in ids if i in self._row_of]
        if clash:
            raise QRAGError(f"ids already in the index: {clash[:5]} (delete them first)")

    def delete(self, ids: Sequence[str]) -> int:
        """Remove chunks by id; unknown ids are ignored. Returns how many were removed."""
        with self._lock:
            old = self._snapshot
            drop = {self._row_of[i] for i in ids if i in self._row_of}
            if not drop:
                return 0
            keep = [r for r in range(len(old)) if r not in drop]
            emb = old.embeddings[torch.tensor(keep, dtype=torch.long, device=self.device)]
            self._swap(Snapshot(tuple(old.chunks[r] for r in keep), emb))
            return len(drop)

    def _swap(self, snap: Snapshot) -> None:
        self._row_of = {c.id: r for r, c in enumerate(snap.chunks)}
        self._snapshot = snap

    # -- persistence --------------------------------------------------------------------------
    def save(
        self,
        path: str | os.PathLike[str],
        extra: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> None:
        """Write the index folder atomically (embeddings as safetensors, records as JSON lines).

        Args:
            path: destination folder: missing, empty, or an earlier saved index (replaced whole).
            extra: more manifest entries.
            overwrite: move anything else at ``path`` aside (see
                :func:`qrag_integrations.core.atomic.move_aside`) instead of refusing.

        Raises:
            QRAGError: a metadata value would not load back as it is (not JSON, keys that are not
                strings, tuples, sets...), a text is not valid Unicode, or something that is not a
                saved index is at ``path``; nothing is written.
        """
        with self._lock:  # the chunks and document ranks of one moment
            snap, doc_rank = self._snapshot, dict(self._doc_rank)
        manifest = {
            "format": INDEX_FORMAT,
            "format_version": INDEX_FORMAT_VERSION,
            "embedding_dim": self.embedding_dim,
            "dtype": next(name for name, dt in INDEX_DTYPES.items() if dt == self.dtype),
            "size": len(snap),
            "doc_rank": doc_rank,
            **(extra or {}),
        }
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
            (tmp / MANIFEST_FILE).write_text(
                json.dumps(manifest, indent=2) + "\n", encoding="utf-8"
            )

    @staticmethod
    def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
        """The ``index.json`` of a saved index, checked."""
        return read_manifest_file(
            Path(path), MANIFEST_FILE, INDEX_FORMAT, INDEX_FORMAT_VERSION, "saved index"
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        expected_dim: int | None = None,
        device: str | torch.device = "cpu",
    ) -> ChunkIndex:
        """Load an index folder written by :meth:`save` (no pickle).

        Raises:
            IndexMismatchError: embedding size differs from ``expected_dim``.
            QRAGError: missing or corrupt files.
        """
        path = Path(path)
        manifest = cls.read_manifest(path)
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
        index = cls(dim, dtype=dtype, device=device)
        try:
            index._doc_rank = {str(k): int(v) for k, v in manifest.get("doc_rank", {}).items()}
        except (AttributeError, TypeError, ValueError) as exc:
            raise QRAGError(f"corrupt {path / MANIFEST_FILE}: bad doc_rank ({exc})") from exc
        index._swap(Snapshot(chunks, emb.to(index.device, index.dtype)))
        return index
