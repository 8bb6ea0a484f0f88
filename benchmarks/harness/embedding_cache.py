"""Chunk embeddings of a fixed text pool, computed once per chunk encoder and kept on disk.

A long-context benchmark hides a few story sentences in up to 40,000 noise sentences per sample.
The noise comes from one fixed pool (:meth:`qrag_training.data.noise.NoiseSource.pool`), so its
embeddings are computed once per chunk encoder and read back on later runs; each sample then
embeds only its own new sentences (:class:`PoolEmbedder`).

A cache entry is a folder ``<cache>/<fingerprint>-<texts digest>/`` keyed by the chunk encoder's
fingerprint (:func:`qrag_integrations.core.checkpoint.chunk_encoder_fingerprint`: the embeddings depend
on exactly those weights) and a SHA-256 of the texts in order. It holds ``cache.json`` (format,
fingerprint, digest, shape) and ``embeddings.safetensors``, is written through
:func:`qrag_integrations.core.atomic.atomic_dir` (complete or absent) and is read without pickle; an
entry whose manifest, header or values do not match what was asked raises
:class:`CacheError` naming the folder, and nothing from it is used.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from qrag_integrations.core.atomic import SaveKind, atomic_dir, write_json_atomic
from qrag_integrations.core.checkpoint import chunk_encoder_fingerprint
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.manifests import read_manifest_file, safetensors_shapes
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.ingest.sharded import texts_digest

logger = logging.getLogger(__name__)

CACHE_DIR = Path(__file__).resolve().parent / ".cache" / "embeddings"
FORMAT = "qrag-bench-embeddings"
FORMAT_VERSION = 1
MANIFEST = "cache.json"
EMBEDDINGS = "embeddings.safetensors"
TENSOR = "embeddings"
ENTRY = SaveKind(
    "benchmark embedding cache entry", frozenset({MANIFEST, EMBEDDINGS}), MANIFEST, FORMAT
)
KEY_CHARS = 24  # hex characters of each hash in an entry's folder name


class CacheError(QRAGError):
    """A cache entry that cannot be trusted (corrupt, or not what its name says)."""


def entry_path(folder: Path, fingerprint: str, digest: str) -> Path:
    """Folder of the entry for a chunk-encoder fingerprint and a texts digest."""
    return Path(folder) / f"{fingerprint[:KEY_CHARS]}-{digest[:KEY_CHARS]}"


def _read_entry(entry: Path, fingerprint: str, digest: str, rows: int, dim: int) -> torch.Tensor:
    def bad(why: str) -> CacheError:
        return CacheError(
            f"untrusted benchmark cache entry {entry}: {why}; delete the folder to recompute it"
        )

    try:
        manifest = read_manifest_file(
            entry, MANIFEST, FORMAT, FORMAT_VERSION, ENTRY.what, error=CacheError
        )
        shapes = safetensors_shapes(entry / EMBEDDINGS, error=CacheError)
    except CacheError as exc:
        raise bad(str(exc)) from exc
    expected = {
        "chunk_encoder_fingerprint": fingerprint,
        "texts_sha256": digest,
        "rows": rows,
        "dim": dim,
    }
    wrong = {k: manifest.get(k) for k, v in expected.items() if manifest.get(k) != v}
    if wrong:
        raise bad(f"its manifest says {wrong}, expected { ({k: expected[k] for k in wrong}) }")
    if shapes != {TENSOR: (rows, dim)}:
        raise bad(f"{EMBEDDINGS} holds {shapes}, expected {{'{TENSOR}': ({rows}, {dim})}}")
    try:
        emb = load_file(str(entry / EMBEDDINGS))[TENSOR]
    except (SafetensorError, OSError, KeyError) as exc:
        raise bad(f"{EMBEDDINGS} cannot be read ({exc})") from exc
    if emb.dtype != torch.float32 or not bool(torch.isfinite(emb).all()):
        raise bad(f"{EMBEDDINGS} is not finite float32 (dtype {emb.dtype})")
    return emb


def cached_chunk_embeddings(
    model: QRAGModel,
    texts: Sequence[str],
    folder: Path = CACHE_DIR,
    batch_size: int = 128,
    show_progress: bool = False,
) -> tuple[torch.Tensor, bool]:
    """``model``'s chunk embeddings of ``texts`` (float32, CPU), from the cache when present.

    Returns:
        ``(embeddings, hit)``: ``hit`` says whether they were read from the cache.

    Raises:
        CacheError: the entry for this encoder and these texts exists but is corrupt or does
            not match them (it is left as it is, and nothing from it is used).
    """
    fingerprint = chunk_encoder_fingerprint(model)
    digest = texts_digest(texts)
    entry = entry_path(folder, fingerprint, digest)
    rows, dim = len(texts), model.embedding_dim
    if entry.exists() or entry.is_symlink():
        return _read_entry(entry, fingerprint, digest, rows, dim), True
    started = time.perf_counter()
    emb = (
        model.embed_chunks(list(texts), batch_size=batch_size, show_progress=show_progress)
        .float()
        .cpu()
    )
    seconds = time.perf_counter() - started
    with atomic_dir(entry, ENTRY) as tmp:
        save_file({TENSOR: emb.contiguous()}, str(tmp / EMBEDDINGS))
        write_json_atomic(
            tmp / MANIFEST,
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "chunk_encoder_fingerprint": fingerprint,
                "texts_sha256": digest,
                "rows": rows,
                "dim": dim,
                "embed_seconds": round(seconds, 1),
            },
        )
    logger.info("embedded %d pool texts in %.0f s, cached in %s", rows, seconds, entry)
    return emb, False


class PoolEmbedder:
    """Chunk embeddings for texts that are mostly in a pre-embedded pool.

    Calling it with chunk texts returns their embeddings: rows of the pool for pool texts, the
    model's chunk encoder for the others (``fresh`` counts those). Pass it as ``embed=`` to
    :func:`qrag_training.baselines.greedy_retrieve` / ``dense_retrieve``.
    """

    def __init__(
        self,
        model: QRAGModel,
        pool: Sequence[str],
        pool_embeddings: torch.Tensor,
        batch_size: int = 128,
    ) -> None:
        if pool_embeddings.shape != (len(pool), model.embedding_dim):
            raise ValueError(
                f"pool embeddings of shape {tuple(pool_embeddings.shape)} for {len(pool)} texts"
            )
        self.model = model
        self.embeddings = pool_embeddings
        self.batch_size = batch_size
        self.row: dict[str, int] = {}
        for i, text in enumerate(pool):
            self.row.setdefault(text, i)
        self.fresh = 0
        """Texts embedded by the model so far (not found in the pool)."""

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        rows = [self.row.get(t, -1) for t in texts]
        new = [i for i, r in enumerate(rows) if r < 0]
        out = self.embeddings[torch.tensor([max(r, 0) for r in rows], dtype=torch.long)].to(
            self.model.device
        )
        if new:
            out[torch.tensor(new, device=out.device)] = self.model.embed_chunks(
                [texts[i] for i in new], batch_size=self.batch_size
            ).to(out.dtype)
            self.fresh += len(new)
        return out


def pool_embedder(
    model: QRAGModel, pool: Sequence[str], folder: Path = CACHE_DIR, batch_size: int = 128
) -> tuple[PoolEmbedder, dict]:
    """A :class:`PoolEmbedder` over ``pool`` (embedded once, cached), and what it cost."""
    started = time.perf_counter()
    emb, hit = cached_chunk_embeddings(model, pool, folder, batch_size, show_progress=False)
    info = {
        "pool_texts": len(pool),
        "cache_hit": hit,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return PoolEmbedder(model, pool, emb, batch_size), info
