"""Store-backed search (Qdrant local mode) vs the exact in-memory search on HotpotQA, pooled.

The HotpotQA sibling of ``store/run.py`` (its ``sample_stores`` / ``timed`` / ``summary``
helpers): every paragraph (``"title: text"``, de-duplicated by text, as ``hotpotqa/run.py``'s
pooled setting) of the questions of a split is embedded once with the checkpoint's chunk encoder
and written to ONE embedded Qdrant collection (``QdrantSource.write_vectors``: the same vectors)
and one exact in-memory ``ChunkIndex``. Each question then runs the exact ``MultiStepSearcher``
and the store-backed ``StoreSearcher`` for every ``--candidates`` value, one question at a time.

Splits as ``hotpotqa/run.py``: ``val`` is the validation slice of the training buckets (the
default; choose here), ``eval`` the held-out bucket 0. Gold = the supporting paragraphs.

Per candidates-per-step value: ``same_picks``, ``recall_exact`` (share of the exact picks among
the store's picks), ``em@2`` / ``em@4`` (both supporting paragraphs among the first 2 / 4 picks),
``exact_rate`` (steps whose candidates held the exact arg-max; ``--check-exact``, a second untimed
pass, on the first ``--check-limit`` questions) and per-question latency (state encoding
included); the exact search gets the same columns.

    python -m benchmarks.store.hotpotqa --limit 20                 # smoke, under a minute
    python -m benchmarks.store.hotpotqa                            # the whole val split
    python -m benchmarks.store.hotpotqa --questions 40 --check-exact --out /tmp/x.json  # whole pool
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.metrics import em_recall

from benchmarks.harness import results as harness
from benchmarks.hotpotqa.problem import build_problem
from benchmarks.store.measure import add_store_args, sample_stores, summary, timed
from qrag_integrations.core.atomic import write_json_atomic
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.search import MultiStepSearcher
from qrag_integrations.stores.search import StoreSearcher

CHECKPOINT = (
    Path(__file__).resolve().parents[2] / "qrag_integrations" / "assets" / "hotpotqa_checkpoint"
)

RESULTS = Path(__file__).resolve().parent / "results"


def row(
    picks: list[list[int]], exact: list[list[int]], gold: list[set[int]], seconds: list[float]
) -> dict:
    """``bench_store.summary`` plus EM@2 / EM@4 (``em@facts`` is EM over the first |gold| picks)."""
    out = summary(picks, exact, gold, seconds)
    for k in (2, 4):
        out[f"em@{k}"], out[f"recall@{k}"] = em_recall([p[:k] for p in picks], gold)
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--checkpoint", default=str(CHECKPOINT), help="checkpoint folder or packaged name"
    )
    p.add_argument(
        "--split",
        choices=("val", "eval"),
        default="val",
        help="val = validation slice of the training side; eval = held-out bucket 0",
    )
    p.add_argument(
        "--limit", type=int, help="at most this many questions (and only their paragraphs)"
    )
    p.add_argument(
        "--questions",
        type=int,
        help="search only the first this many (the pool keeps all paragraphs)",
    )
    p.add_argument(
        "--check-limit",
        type=int,
        help="with --check-exact: check only the first this many questions",
    )
    add_store_args(p, "results/store_hotpotqa_<split>.json")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict:
    from qdrant_client import QdrantClient

    args = parse_args(argv)
    harness.set_threads(args.threads)
    model = load_model(args.checkpoint).eval()
    episodes = [e for e in load_hotpotqa(args.split) if len(e.support) >= 2][: args.limit]
    problem = build_problem(episodes, pooled=True)
    started = time.perf_counter()
    emb = model.embed_chunks(problem.texts, batch_size=64).float().cpu()
    embed_secs = time.perf_counter() - started
    print(
        f"{len(episodes)} questions, {len(problem.texts)} paragraphs embedded in {embed_secs:.0f} s",
        flush=True,
    )

    client = (
        QdrantClient(path=str(args.qdrant_path)) if args.qdrant_path else QdrantClient(":memory:")
    )
    started = time.perf_counter()
    corpus = SimpleNamespace(chunks=problem.texts)  # sample_stores reads only .chunks
    index, source = sample_stores(model, corpus, lambda _: emb, client, f"hotpotqa-{args.split}")
    ingest_secs = time.perf_counter() - started
    started = time.perf_counter()
    source.layout(None)  # the document order, read once and reused by every search below
    layout_secs = time.perf_counter() - started

    exact = MultiStepSearcher(model, index)
    searchers = {c: StoreSearcher(model, source, candidates_per_step=c) for c in args.candidates}
    runs = {c: {"picks": [], "seconds": [], "checked": 0, "found": 0} for c in args.candidates}
    exact_picks, exact_secs = [], []
    loop_started = time.perf_counter()
    questions, gold = problem.questions[: args.questions], problem.gold[: args.questions]
    for i, question in enumerate(questions):
        picks, secs = timed(lambda q, k: exact.search(q, k), question, args.steps)
        exact_picks.append(picks)
        exact_secs.append(secs)
        for cps, run in runs.items():
            picks, secs = timed(searchers[cps].search, question, args.steps)
            run["picks"].append(picks)
            run["seconds"].append(secs)
            if args.check_exact and i < (args.check_limit or len(questions)):
                checked = StoreSearcher(model, source, candidates_per_step=cps, check_exact=True)
                checked.search([question], args.steps)
                run["checked"] += checked.stats.exact_checked
                run["found"] += checked.stats.exact_in_candidates
        if (i + 1) % 25 == 0:
            print(f"  {i + 1} questions, {time.perf_counter() - loop_started:.0f} s", flush=True)

    result: dict = {
        "benchmark": "store_hotpotqa",
        "checkpoint": args.checkpoint,
        "split": args.split,
        "split_note": "eval = held-out hash bucket 0; val = validation slice of the training side",
        "setting": "pooled",
        "questions": len(questions),
        "pool_questions": len(episodes),
        "paragraphs": len(problem.texts),
        "steps": args.steps,
        "candidates": args.candidates,
        "check_exact": args.check_exact,
        "check_limit": args.check_limit if args.check_exact else None,
        "qdrant": str(args.qdrant_path) if args.qdrant_path else ":memory:",
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "embed_seconds": round(embed_secs, 1),
        "ingest_seconds": round(ingest_secs, 2),
        "layout_seconds": round(layout_secs, 2),
        "exact": row(exact_picks, exact_picks, gold, exact_secs),
        "store": {},
    }
    for cps, run in runs.items():
        r = row(run["picks"], exact_picks, gold, run["seconds"])
        r["exact_rate"] = run["found"] / run["checked"] if run["checked"] else None
        result["store"][str(cps)] = r
    result["seconds"] = round(
        time.perf_counter() - loop_started + embed_secs + ingest_secs + layout_secs, 1
    )
    out = args.out or RESULTS / f"store_hotpotqa_{args.split}.json"
    write_json_atomic(out, result)
    ex = result["exact"]
    print(f"exact: EM@2 {ex['em@2']:.3f} EM@4 {ex['em@4']:.3f} {ex['seconds_mean']:.3f}s")
    for c, r in result["store"].items():
        rate = "" if r["exact_rate"] is None else f" exact_rate {r['exact_rate']:.3f}"
        print(
            f"{c:>4}/step: same {r['same_picks']:.3f} recall {r['recall_exact']:.3f} EM@2 {r['em@2']:.3f} "
            f"EM@4 {r['em@4']:.3f} {r['seconds_mean']:.3f}s{rate}"
        )
    print(f"wrote {out} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
