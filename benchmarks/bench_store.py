"""Store-backed search (Qdrant local mode) vs the exact in-memory search on BabiLong-style haystacks.

Data: the generators of ``bench_babilong.py`` (seeded bAbI stories hidden in the fixed noise pool,
25 tokens per sentence; pool embeddings cached on disk per chunk encoder). Each sample's chunks
are written once to an embedded Qdrant collection (``QdrantSource.write_vectors``: the same
vectors the in-memory index holds) and searched with every ``--candidates`` value.

Per candidates-per-step value: ``same_picks`` (share of questions whose picks equal the exact
search's, in order), ``recall_exact`` (share of the exact picks among the store's picks),
``exact_rate`` (share of steps whose candidates held the exact arg-max; with ``--check-exact``),
``em@facts`` (every supporting fact among the first ``|support|`` picks) and per-question search
latency (mean and median seconds, state encoding included, without the ``--check-exact``
pass); the exact search gets the same columns. The document order of a collection is read once
after its ingest (``layout_seconds_mean``) and reused by the searches, as a retriever over an
unchanged collection does.

    python benchmarks/bench_store.py --tokens 4000 --n 5                 # smoke test, ~a minute
    python benchmarks/bench_store.py --tokens 1000000 --n 5 --tasks qa1,qa2 --check-exact
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from common import em_recall
from embedding_cache import CACHE_DIR, PoolEmbedder, pool_embedder
from qrag_training.data.babilong import babilong_dataset, tokens_to_sentences
from qrag_training.data.episode import Episode
from qrag_training.data.noise import MIXED, NoiseSource

from qrag_integrations.core.atomic import write_json_atomic
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.search import MultiStepSearcher
from qrag_integrations.stores.rows import model_fingerprint, plan_rows
from qrag_integrations.stores.search import StoreSearcher

POOL_MAX = 40_000  # sentences: 1M tokens, as bench_babilong.py


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


def run_cell(
    model: QRAGModel, embed: PoolEmbedder, task: str, args: argparse.Namespace, pool
) -> dict:
    from qdrant_client import QdrantClient

    episodes = babilong_dataset(task, args.n, args.tokens, args.seed, noise=pool)
    client = (
        QdrantClient(path=str(args.qdrant_path)) if args.qdrant_path else QdrantClient(":memory:")
    )
    gold = [set(e.support) for e in episodes]
    exact_picks, exact_secs, ingest_secs, layout_secs = [], [], [], []
    store_runs: dict[int, dict] = {
        c: {"picks": [], "seconds": [], "checked": 0, "found": 0} for c in args.candidates
    }
    for j, episode in enumerate(episodes):
        started = time.perf_counter()
        index, source = sample_stores(model, episode, embed, client, f"bench-{task}-{j}")
        ingest_secs.append(time.perf_counter() - started)
        started = time.perf_counter()
        source.layout(None)  # the document order, read once and reused by every search below
        layout_secs.append(time.perf_counter() - started)
        exact = MultiStepSearcher(model, index)
        picks, secs = timed(exact.search, episode.question, args.steps)
        exact_picks.append(picks)
        exact_secs.append(secs)
        for cps, run in store_runs.items():
            searcher = StoreSearcher(model, source, candidates_per_step=cps)
            picks, secs = timed(searcher.search, episode.question, args.steps)
            run["picks"].append(picks)
            run["seconds"].append(secs)
            if args.check_exact:  # a second, untimed search: the check scores every chunk
                checked = StoreSearcher(model, source, candidates_per_step=cps, check_exact=True)
                checked.search([episode.question], args.steps)
                run["checked"] += checked.stats.exact_checked
                run["found"] += checked.stats.exact_in_candidates
        client.delete_collection(f"bench-{task}-{j}")
    cell = {
        "task": task,
        "tokens": args.tokens,
        "n": len(episodes),
        "chunks": statistics.mean(len(e.chunks) for e in episodes),
        "ingest_seconds_mean": round(statistics.mean(ingest_secs), 3),
        "layout_seconds_mean": round(statistics.mean(layout_secs), 3),
        "exact": summary(exact_picks, exact_picks, gold, exact_secs),
        "store": {},
    }
    for cps, run in store_runs.items():
        row = summary(run["picks"], exact_picks, gold, run["seconds"])
        row["exact_rate"] = run["found"] / run["checked"] if run["checked"] else None
        cell["store"][str(cps)] = row
    line = "  ".join(
        f"{c}: same {r['same_picks']:.2f} EM {r['em@facts']:.2f} {r['seconds_mean']:.3f}s"
        for c, r in cell["store"].items()
    )
    print(
        f"[{task} {args.tokens} tok, n={len(episodes)}, {cell['chunks']:.0f} chunks] exact EM "
        f"{cell['exact']['em@facts']:.2f} {cell['exact']['seconds_mean']:.3f}s | {line}",
        flush=True,
    )
    return cell


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--checkpoint", default="packaged:qrag-babi-demo", help="checkpoint folder or packaged name"
    )
    p.add_argument("--tasks", default="qa1,qa2", help="comma-separated bAbI tasks")
    p.add_argument(
        "--tokens", type=int, default=4000, help="haystack length in tokens (1000000 for 1M)"
    )
    p.add_argument("--n", type=int, default=5, help="samples per task")
    p.add_argument(
        "--seed",
        type=int,
        default=424242,
        help="episode and noise-pool seed (bench_babilong's test split)",
    )
    p.add_argument(
        "--cache-dir", type=Path, default=CACHE_DIR, help="where pool embeddings are cached"
    )
    add_store_args(p, "results/store_<tokens>.json")
    return p.parse_args(argv)


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


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    common.set_threads(args.threads)
    model = load_model(args.checkpoint).eval()
    pool = NoiseSource(MIXED).pool(min(tokens_to_sentences(args.tokens), POOL_MAX), seed=args.seed)
    embed, pool_info = pool_embedder(model, pool.sentences, args.cache_dir)
    result: dict = {
        "benchmark": "store",
        "checkpoint": args.checkpoint,
        "tokens": args.tokens,
        "steps": args.steps,
        "candidates": args.candidates,
        "seed": args.seed,
        "pool_embedding": pool_info,
        "command": common.command_line(list(argv) if argv is not None else None),
        "code": common.code_version(),
        "machine": common.machine_info(args.threads, "cpu"),
        "cells": [],
    }
    out = args.out or common.RESULTS / f"store_{args.tokens}.json"
    started = time.perf_counter()
    for task in [t for t in args.tasks.split(",") if t.strip()]:
        result["cells"].append(run_cell(model, embed, task, args, pool))
        result["seconds"] = round(time.perf_counter() - started, 1)
        write_json_atomic(out, result)
    print(f"wrote {out} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
