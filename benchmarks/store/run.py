"""Store-backed search (Qdrant local mode) vs the exact in-memory search on BabiLong-style haystacks.

Data: the generators of ``babilong/run.py`` (seeded bAbI stories hidden in the fixed noise pool,
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

    python -m benchmarks.store.run --tokens 4000 --n 5                 # smoke test, ~a minute
    python -m benchmarks.store.run --tokens 1000000 --n 5 --tasks qa1,qa2 --check-exact
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from qrag_training.data.babilong import babilong_dataset, tokens_to_sentences
from qrag_training.data.noise import MIXED, NoiseSource

from benchmarks.babilong.cells import POOL_MAX
from benchmarks.harness import results as harness
from benchmarks.harness.embedding_cache import CACHE_DIR, PoolEmbedder, pool_embedder
from benchmarks.store.measure import add_store_args, sample_stores, summary, timed
from qrag_integrations.core.atomic import write_json_atomic
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.search import MultiStepSearcher
from qrag_integrations.stores.search import StoreSearcher

RESULTS = Path(__file__).resolve().parent / "results"


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


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
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
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "cells": [],
    }
    out = args.out or RESULTS / f"store_{args.tokens}.json"
    started = time.perf_counter()
    for task in [t for t in args.tasks.split(",") if t.strip()]:
        result["cells"].append(run_cell(model, embed, task, args, pool))
        result["seconds"] = round(time.perf_counter() - started, 1)
        write_json_atomic(out, result)
    print(f"wrote {out} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
