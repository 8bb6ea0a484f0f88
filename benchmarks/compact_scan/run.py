"""Compact scans side by side: a multi-step search that scans float32 (exact), int8 or binary
copies of the chunk embeddings (re-scoring the best ``--rescore`` exactly), on each encoder
backend, against one dense search on the same backend and on torch, in one run.

- **Speed**: a ``--k``-step search per question over each of ``--sizes`` chunks (real texts with random
  embeddings at real norms, ``benchmarks/search/corpus.py``: scan costs do not depend on the
  values), median over ``--queries`` questions, the calls of all methods interleaved question by
  question; one dense search = encode the question + FAISS flat inner product (what a user has
  today).
- **Quality** (real embeddings): HotpotQA val questions searched together over one pooled index
  of all their paragraphs plus ``--noise`` real text chunks (Shakespeare lines): EM@2 / EM@4
  (both gold paragraphs among the first picks) and the share of questions whose 4 picks equal
  the exact scan's on the same backend.
- **Memory**: bytes per chunk of the stored embeddings and of the compact copy.

Model: ``--model`` with its own search rules (default the untrained MiniLM: question anchoring,
no positions, no rules).

    python -m benchmarks.compact_scan.run --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import faiss
import torch
from qrag_training.data.hotpotqa import load_hotpotqa

import qrag_integrations
from benchmarks.harness import results as harness
from benchmarks.harness.embedding_cache import CACHE_DIR, cached_chunk_embeddings
from benchmarks.harness.texts import numbered_questions, shakespeare_lines
from benchmarks.search.corpus import make_texts, synthetic_index
from qrag_integrations.core.compact_scan import BYTES_PER_DIMENSION
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings

RESULTS = Path(__file__).resolve().parent / "results"
QUALITY_PICKS = 4


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--sizes", default="10000,100000,400000,1000000", help="chunks in the timed indexes"
    )
    p.add_argument("--queries", type=int, default=10, help="questions timed (median)")
    p.add_argument("--k", type=int, default=3, help="search steps (timed)")
    p.add_argument("--scans", default="exact,int8,binary", help="comma-separated scan kinds")
    p.add_argument("--rescore", type=int, default=400, help="candidates re-scored per step")
    p.add_argument(
        "--backends",
        default="torch,onnx",
        help="comma-separated encoder backends, each BACKEND or BACKEND:QUANTIZE (onnx:int8)",
    )
    p.add_argument("--hotpotqa", type=int, default=263, help="HotpotQA val questions (quality)")
    p.add_argument("--noise", type=int, default=20_000, help="real noise chunks (quality)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--model",
        default=PACKAGED_MINILM,
        help="checkpoint searched, with its own search rules (default: the untrained MiniLM)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--cache", type=Path, default=CACHE_DIR, help="embedding cache of the quality index"
    )
    return p.parse_args(argv)


def interleaved_medians(calls: dict, queries: Sequence[str]) -> dict:
    """Per key of ``calls``, the median over ``queries`` of one call ``fn(query)``; for each
    question every call runs once, one after the other."""
    times: dict = {key: [] for key in calls}
    for q in queries:
        for key, fn in calls.items():
            started = time.perf_counter()
            fn(q)
            times[key].append(time.perf_counter() - started)
    return {key: statistics.median(t) for key, t in times.items()}


def quality_index(model, episodes, noise: int, lines: list[str], cache: Path) -> ChunkIndex:
    """Every paragraph of ``episodes`` (once) plus ``noise`` real text chunks, embedded for real."""
    paragraphs = list(dict.fromkeys(c for e in episodes for c in e.chunks))
    texts = paragraphs + [t for t in make_texts(noise, lines[::7]) if t not in set(paragraphs)]
    emb, _ = cached_chunk_embeddings(model, texts, folder=cache)
    index = ChunkIndex(model.embedding_dim)
    index.add(texts, emb, ids=[str(i) for i in range(len(texts))])
    return index


def found_gold(hits, gold: set[str], k: int) -> bool:
    return gold <= {h.chunk.text for h in hits[:k]}


def backend_models(backends: Sequence[str], checkpoint: str = PACKAGED_MINILM) -> dict:
    """The model once per encoder backend (``BACKEND`` or ``BACKEND:QUANTIZE``)."""
    models = {}
    for spec in backends:
        backend, _, quantize = spec.partition(":")
        model = qrag_integrations.load_model(checkpoint).eval()
        if spec != "torch":
            model.set_backend(backend, quantize or None)
        models[spec] = model
    return models


def quality(model, pooled: ChunkIndex, episodes, gold, scans, rescore: int) -> dict[str, dict]:
    """Per scan kind: EM@2 / EM@4 over the pooled index and the share of picks equal to the
    exact scan's (the first kind)."""
    out, exact = {}, None
    for scan in scans:
        settings = SearchSettings(scan=scan, rescore=rescore)
        hits = MultiStepSearcher(model, pooled, settings).search(
            [e.question for e in episodes], QUALITY_PICKS
        )
        picks = [[h.chunk.id for h in hs] for hs in hits]
        exact = exact or picks
        out[scan] = {
            f"hotpotqa_val_em@{k}": statistics.mean(found_gold(h, g, k) for h, g in zip(hits, gold))
            for k in (2, 4)
        } | {"same_picks_as_exact": statistics.mean(p == e for p, e in zip(picks, exact))}
    return out


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    out = args.out or RESULTS / f"compact_scan_{args.threads}thread.json"
    scans = [s for s in args.scans.split(",") if s]
    lines = shakespeare_lines()
    models = backend_models([b for b in args.backends.split(",") if b], args.model)
    qs = numbered_questions(args.queries)
    episodes = load_hotpotqa(split="val", limit=args.hotpotqa)
    gold = [{e.chunks[i] for i in e.support} for e in episodes]
    rows, setup = [], {}
    with torch.inference_mode():
        pooled = quality_index(models["torch"], episodes, args.noise, lines, args.cache)
        quality_of = {
            b: quality(m, pooled, episodes, gold, scans, args.rescore) for b, m in models.items()
        }
        for size in [int(x) for x in args.sizes.split(",") if x]:
            index = synthetic_index(models["torch"], size, args.seed, lines)
            flat = faiss.IndexFlatIP(index.embedding_dim)
            flat.add(index.snapshot().embeddings.numpy())
            # every timed call of a size interleaved, question by question, so that a drift in
            # the machine's speed shifts every ratio alike (2-core VMs drift by ~30%)
            timed = {}
            for backend, model in models.items():
                timed[(backend, "dense")] = lambda q, m=model, f=flat: f.search(
                    m.embed_states([q]).numpy(), 1
                )
                for scan in scans:
                    searcher = MultiStepSearcher(
                        model, index, SearchSettings(scan=scan, rescore=args.rescore)
                    )
                    started = time.perf_counter()
                    searcher.search(qs[:1], args.k)  # warm-up; builds the compact copy
                    setup[(backend, scan)] = time.perf_counter() - started
                    timed[(backend, scan)] = lambda q, s=searcher: s.search([q], args.k)
            seconds = interleaved_medians(timed, qs)
            for backend in models:
                for scan in scans:
                    row = {
                        "size": size,
                        "backend": backend,
                        "scan": scan,
                        "rescore": args.rescore if scan != "exact" else None,
                        "first_search_seconds": setup[(backend, scan)],
                        "search_seconds_per_question": seconds[(backend, scan)],
                        "dense_seconds_per_question_same_backend": seconds[(backend, "dense")],
                        **quality_of[backend][scan],
                        "bytes_per_chunk": 4 * index.embedding_dim
                        + BYTES_PER_DIMENSION.get(scan, 0) * index.embedding_dim,
                    }
                    rows.append(row)
                    print(row, flush=True)
    for row in rows:
        torch_dense = next(r for r in rows if r["backend"] == "torch" and r["size"] == row["size"])
        row["search_vs_one_torch_dense_search"] = (
            row["search_seconds_per_question"]
            / torch_dense["dense_seconds_per_question_same_backend"]
        )
        row["search_vs_one_dense_search_same_backend"] = (
            row["search_seconds_per_question"] / row["dense_seconds_per_question_same_backend"]
        )
    result = {
        **harness.provenance(argv, args.threads),
        "model": models["torch"].config.base_model,
        "position_mode": models["torch"].config.position_mode.value,
        "k": args.k,
        "queries": args.queries,
        "quality": {
            "hotpotqa_val_questions": len(episodes),
            "pooled_chunks": len(pooled),
            "picks": QUALITY_PICKS,
        },
        "rows": rows,
    }
    print(
        f"\n{args.threads} thread(s); quality: {len(episodes)} HotpotQA val "
        f"questions over {len(pooled):,} pooled chunks\n"
        "| chunks | backend | scan | 3-step search ms | x one torch dense search | x dense, same backend "
        "| EM@2 / EM@4 | same picks as exact | bytes/chunk |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['backend']} | {r['scan']} | {1000 * r['search_seconds_per_question']:.0f} "
            f"| {r['search_vs_one_torch_dense_search']:.2f} "
            f"| {r['search_vs_one_dense_search_same_backend']:.2f} "
            f"| {r['hotpotqa_val_em@2']:.3f} / {r['hotpotqa_val_em@4']:.3f} "
            f"| {r['same_picks_as_exact']:.3f} | {r['bytes_per_chunk']:.0f} |"
        )
    harness.write_json(out, result)
    return result


if __name__ == "__main__":
    main()
