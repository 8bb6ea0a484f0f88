"""A chunk index: texts, metadata, document ids and order, and their chunk embeddings.

Rows are kept in *document order*: documents by their ids in natural order
(:func:`~qrag_integrations.core.chunks.document_sort_key`), chunks of a document by their
``order``. This global order is what Q-RAG's positions are laid out over; it depends on the
documents and never on the order in which they were added, so neither do the picks.
Updates never modify arrays in place: ``add`` / ``delete`` build new arrays and swap them in
under a lock, so a search running in another thread sees one consistent snapshot. The saved
form is :mod:`~qrag_integrations.core.index_files`'s.

What a search reads of a snapshot are its candidates (:class:`IndexCandidates`: all rows, or those
a filter matched, a :class:`~qrag_integrations.core.step.CandidateSet`), built by
:class:`DocumentRotation` (in document position modes with their fixed layout, and a rotated copy
kept while the snapshot's embeddings last).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.chunks import (
    BuiltFor,
    Chunk,
    MetadataFilter,
    Snapshot,
    document_sort_key,
)
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.errors import IndexMismatchError, QRAGError
from qrag_integrations.core.index_files import (
    INDEX_DTYPES,
    read_index_folder,
    read_index_manifest,
    write_index_folder,
)
from qrag_integrations.core.positions import (
    DocumentLayout,
    Runs,
    document_runs,
    fixed_layout,
    layout_runs,
    overlaid,
    picked_documents,
)
from qrag_integrations.core.step import CorpusTexts


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
        self._doc_keys: dict[str, tuple[tuple[int, int | str], ...]] = {}
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
        replace: bool = False,
    ) -> list[str]:
        """Add chunks whose embeddings are already computed.

        Args:
            texts: chunk texts.
            embeddings: ``(len(texts), D)`` unrotated chunk embeddings.
            metadatas: one dict per chunk (default empty).
            ids: unique chunk ids (default: random UUIDs); an id already present is an error.
            doc_ids: document of each chunk (default: one new document per call).
            orders: order of each chunk inside its document (default: running count per document).
            replace: chunks whose ids are already present replace them (same swap) instead of
                being refused.

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
            self.check_new(n, metadatas, None if replace else ids)
            if replace and len(set(ids)) != n:
                raise QRAGError("ids must be unique")
            if doc_ids is None:
                doc_ids = [f"doc-{uuid.uuid4().hex}"] * n
            doc_ids = [str(d) for d in doc_ids]
            if len(doc_ids) != n:
                raise QRAGError(f"doc_ids has {len(doc_ids)} entries for {n} texts")
            old = self._without({self._row_of[i] for i in ids if i in self._row_of})
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
            new = [
                Chunk(i, t, m, d, o)
                for i, t, m, d, o in zip(ids, texts, metadatas, doc_ids, orders_list)
            ]
            chunks = list(old.chunks) + new
            emb = torch.cat([old.embeddings, embeddings.to(self.device, self.dtype)])
            self._swap(self._in_document_order(chunks, emb))
        return ids

    def _in_document_order(self, chunks: list[Chunk], emb: torch.Tensor) -> Snapshot:
        """``chunks`` (rows of ``emb``) sorted by document key, order and id (the id breaks
        ties, so equal keys never fall back on the order of arrival)."""
        keys = [(self._doc_key(c.doc_id), c.order, c.id) for c in chunks]
        if any(keys[i] > keys[i + 1] for i in range(len(keys) - 1)):
            perm = sorted(range(len(chunks)), key=keys.__getitem__)
            chunks = [chunks[i] for i in perm]
            emb = emb[torch.tensor(perm, dtype=torch.long, device=self.device)]
        return Snapshot(tuple(chunks), emb)

    def _doc_key(self, doc_id: str) -> tuple[tuple[int, int | str], ...]:
        key = self._doc_keys.get(doc_id)
        if key is None:
            key = self._doc_keys[doc_id] = document_sort_key(doc_id)
        return key

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
            raise QRAGError(
                f"ids already in the index: {clash[:5]}; chunk ids are unique: delete them first "
                "(retriever.delete(ids)) to replace their chunks"
            )

    def chunks_of_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Ids of every chunk of these documents, in document order."""
        wanted = set(doc_ids)
        return [c.id for c in self._snapshot.chunks if c.doc_id in wanted]

    def delete(self, ids: Sequence[str]) -> int:
        """Remove chunks by id; unknown ids are ignored. Returns how many were removed."""
        with self._lock:
            drop = {self._row_of[i] for i in ids if i in self._row_of}
            if not drop:
                return 0
            self._swap(self._without(drop))
            return len(drop)

    def _without(self, drop: set[int]) -> Snapshot:
        """The current snapshot less the rows ``drop`` (itself when there are none)."""
        old = self._snapshot
        if not drop:
            return old
        keep = [r for r in range(len(old)) if r not in drop]
        emb = old.embeddings[torch.tensor(keep, dtype=torch.long, device=self.device)]
        return Snapshot(tuple(old.chunks[r] for r in keep), emb)

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
        snap = self._snapshot  # one consistent moment
        # each document's rank in the saved order (read by older versions of this format)
        doc_rank = {d: r for r, d in enumerate(dict.fromkeys(c.doc_id for c in snap.chunks))}
        manifest = {
            "embedding_dim": self.embedding_dim,
            "dtype": next(name for name, dt in INDEX_DTYPES.items() if dt == self.dtype),
            "size": len(snap),
            "doc_rank": doc_rank,
            **(extra or {}),
        }
        write_index_folder(path, snap, manifest, overwrite=overwrite)

    @staticmethod
    def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
        """The ``index.json`` of a saved index, checked."""
        return read_index_manifest(path)

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
        saved = read_index_folder(path, expected_dim)
        index = cls(saved.embedding_dim, dtype=saved.dtype, device=device)
        # an index saved before documents were ordered by id is put in that order here
        index._swap(
            index._in_document_order(
                list(saved.chunks), saved.embeddings.to(index.device, index.dtype)
            )
        )
        return index


@dataclass(frozen=True)
class IndexCandidates:
    """The chunks one question searches: a snapshot's rows (all, or those a filter matched)."""

    snap: Snapshot
    rows: np.ndarray | None
    """Snapshot rows of the candidates in document order; ``None`` = every row."""
    emb: torch.Tensor
    """Their embeddings, row ``r`` = candidate rank ``r``."""
    runs: Runs | None = None
    """Document position modes on unrotated ``emb``: the runs ``(start, stop, position)`` of equal
    fixed positions, the layout every step scores (``document_relative`` re-lays out the documents
    holding picks over them; ``None``: the mode's own layout, or a rotated copy)."""
    plain: torch.Tensor | None = None
    """The candidates' stored (unrotated) embeddings where ``emb`` is a rotated copy."""
    layout: DocumentLayout | None = None
    """Document position modes: where each candidate sits in its document."""

    @property
    def fixed(self) -> np.ndarray | None:
        """Document position modes: each candidate's fixed position (a document-mode hit reports
        it); ``emb`` is already rotated by it unless ``runs`` is set."""
        return None if self.layout is None else self.layout.fixed

    @property
    def unrotated(self) -> torch.Tensor:
        """The candidates' embeddings as stored (no document-position rotation)."""
        return self.emb if self.plain is None else self.plain

    @classmethod
    def of(cls, snap: Snapshot, filter: MetadataFilter | None) -> IndexCandidates:
        rows = snap.rows_matching(filter)
        emb = (
            snap.embeddings
            if rows is None
            else snap.embeddings[torch.from_numpy(rows).to(snap.embeddings.device)]
        )
        return cls(snap, rows, emb)

    @property
    def n(self) -> int:
        return int(self.emb.shape[0])

    def chunk(self, rank: int) -> Chunk:
        return self.snap.chunks[rank if self.rows is None else int(self.rows[rank])]

    def vectors(self, ranks: Sequence[int]) -> torch.Tensor:
        # only the rows asked for, never the whole matrix (a copy of every embedding per call)
        return self.unrotated[torch.tensor(list(ranks), device=self.unrotated.device)]

    def corpus(self) -> CorpusTexts:
        """The snapshot's texts, keyed by its stored embeddings (a new snapshot has new ones)."""
        snap = self.snap
        return CorpusTexts(snap.embeddings, lambda: [c.text for c in snap.chunks], self.rows)

    def layout_runs(
        self, config: QRAGConfig, picked: list[int]
    ) -> list[tuple[int, int, int]] | None:
        """The runs ``(start, stop, position)`` of equal positions a step scores ``emb`` at, given
        the ranks ``picked`` (``None``: absolute positions, every chunk its own)."""
        step, span = config.relative_step, config.relative_span
        if self.layout is None:
            return layout_runs(config.position_mode, self.n, picked, step, span)
        base = list(self.runs) if self.runs is not None else [(0, self.n, 0)] if self.n else []
        if config.position_mode is not PositionMode.DOCUMENT_RELATIVE or not picked:
            return base
        return overlaid(base, *self.relaid(config, picked))

    def relaid(
        self, config: QRAGConfig, picked: list[int]
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
        """``document_relative``: the ``(start, stop)`` of each document holding picks, and those
        documents' runs (positions over ``emb``) laid out around them."""
        assert self.layout is not None
        order, length = self.layout.order, self.layout.length
        offset = None if self.runs is not None else self.fixed  # a rotated copy is searched
        runs = document_runs(
            order, length, picked, config.relative_step, config.relative_span, offset
        )
        return picked_documents(order, length, picked), runs

    def fixed_of(self, ranks: np.ndarray) -> np.ndarray | None:
        """The positions to rotate ``emb[ranks]`` by when scoring them one by one (``None``: as
        they are, already rotated or no fixed positions)."""
        return None if self.runs is None or self.fixed is None else self.fixed[ranks]

    def position(self, rank: int, searched: int) -> int:
        """The position a hit on ``rank`` reports, given the one it was scored at: on a rotated
        copy the fixed rotation is added (document mode scores those at 0)."""
        if self.fixed is None or self.runs is not None:
            return searched
        return int(self.fixed[rank]) + searched

    def shares(self, config: QRAGConfig, picked: Sequence[Sequence[int]]) -> bool:
        """Whether a batch with these picks is scanned as one
        (:func:`~qrag_integrations.core.exact_scan.relaid_top_k`): positions
        ``document_relative``, two or more questions, and their relaid documents together no
        bigger than the index (so the per-question scans add at most one pass)."""
        if config.position_mode is not PositionMode.DOCUMENT_RELATIVE:
            return False
        if len(picked) < 2 or self.layout is None or self.rows is not None:
            return False
        order, length = self.layout.order, self.layout.length
        relaid = sum(hi - lo for p in picked for lo, hi in picked_documents(order, length, p))
        return relaid <= self.n


class DocumentRotation:
    """The candidates a search scores: a snapshot's rows as they are, or in document position
    mode with their fixed positions: as stored with runs of equal positions (few long runs), else
    rotated (then the search proper runs as in mode none); a whole snapshot's layout (and rotated
    copy) is kept until its embeddings change (thread-safe)."""

    def __init__(self, config: QRAGConfig) -> None:
        self.config = config
        self._slot = BuiltFor()

    def candidates(
        self, snap: Snapshot, filter: MetadataFilter | None, keep: bool = True
    ) -> IndexCandidates:
        """The candidates of ``snap`` under ``filter``; ``keep=False``: a rotated copy is not kept
        (one of many indexes searched once)."""
        plain = IndexCandidates.of(snap, filter)
        if not self.config.position_mode.in_documents:
            return plain
        if plain.rows is not None:
            doc_ids = [snap.chunks[int(r)].doc_id for r in plain.rows]
            where, runs, rotated = fixed_layout(doc_ids, plain.emb, self.config)
            emb = plain.emb if rotated is None else rotated
            return IndexCandidates(snap, plain.rows, emb, runs, plain.emb, where)

        def build() -> tuple[DocumentLayout, Runs | None, torch.Tensor | None]:
            return fixed_layout([c.doc_id for c in snap.chunks], snap.embeddings, self.config)

        where, runs, rotated = self._slot.get(snap.embeddings, build) if keep else build()
        if rotated is None:
            return IndexCandidates(snap, None, snap.embeddings, runs, layout=where)
        return IndexCandidates(
            Snapshot(snap.chunks, rotated), None, rotated, None, snap.embeddings, where
        )
