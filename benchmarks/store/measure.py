"""What both store benchmarks share: building a Qdrant collection beside the exact index, timing a
search, the summary of a cell, and the command-line options."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from qrag_training.data.episode import Episode
from qrag_training.metrics import em_recall

from benchmarks.harness.embedding_cache import PoolEmbedder
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.stores.rows import model_fingerprint, plan_rows


def sample_stores(model: QRAGModel, episode: Episode, embed: PoolEmbedder, client, name: str):
    """The exact in-memory index and a Qdrant collection holding the same chunk vectors."""
    from qrag_integrations.stores.qdrant import QdrantSource

    ids = [f"c{i}" for i in range(len(episode.chunks))]
    vectors = embed(episode.chunks).float().cpu()
    index = ChunkIndex(model.embedding_dim)
    index.add(episode.chunks, vectors, ids=ids, doc_ids=["story"] * len(ids))
    source = QdrantSource(client, name, model)
    rows, next_rank = plan_rows(
        episode.chunks,
        model_fingerprint(model),
        lambda d: None,
        0,
        ids=ids,
        doc_ids=["story"] * len(ids),
    )
    source.write_vectors(rows, vectors.numpy(), next_rank)
    return index, source


def timed(search, question: str, k: int) -> tuple[list[int], float]:
    started = time.perf_counter()
    hits = search([question], k)[0]
    return [int(h.chunk.id[1:]) for h in hits], time.perf_counter() - started


def summary(
    picks: list[list[int]], exact: list[list[int]], gold: list[set[int]], seconds: list[float]
) -> dict:
    em, _ = em_recall([p[: len(g)] for p, g in zip(picks, gold)], gold)
    return {
        "same_picks": statistics.mean(p == e for p, e in zip(picks, exact)),
        "recall_exact": statistics.mean(
            len(set(p) & set(e)) / max(1, len(e)) for p, e in zip(picks, exact)
        ),
        "em@facts": em,
        "seconds_mean": round(statistics.mean(seconds), 4),
        "seconds_median": round(statistics.median(seconds), 4),
    }


def add_store_args(p: argparse.ArgumentParser, default_out: str) -> None:
    """The options every store benchmark shares (also ``bench_store_hotpotqa.py``)."""
    p.add_argument(
        "--candidates",
        type=lambda s: [int(c) for c in s.split(",") if c.strip()],
        default="16,64,256",
        help="comma-separated candidates per step",
    )
    p.add_argument("--steps", type=int, default=4, help="search steps per question")
    p.add_argument(
        "--check-exact",
        action="store_true",
        help="count steps whose candidates held the exact arg-max (slower)",
    )
    p.add_argument(
        "--qdrant-path", type=Path, help="folder of an embedded on-disk Qdrant (default: in memory)"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, help=f"JSON path (default {default_out})")
