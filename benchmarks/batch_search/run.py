"""Questions per second of a batched 3-step search against one call per question, side by side.

The retriever's ``batch`` runs one search for all its questions: every step encodes the batch's
states together and, when positions do not depend on the picks (the default's position mode
``none``), scores the whole batch in one pass over the index. Index: ``--size`` chunks of real
texts with random embeddings scaled to real norms (``benchmarks/search/corpus.py``; scan costs do
not depend on the values), the untrained packaged MiniLM (question anchoring) or ``--checkpoint``. For each
batch size: the time of one ``search(batch, k)`` call, and of the same questions one call each,
and the share of questions whose picks are the same both ways (states encoded in one batch differ
from single encodes by float rounding). ``--scan bf16`` scans a bfloat16 copy of the embeddings
for the batch (re-scoring the best ``--rescore`` exactly) while single calls scan exactly, so
"same picks" is then also its quality check.

    python -m benchmarks.batch_search.run --size 400000 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import qrag_integrations
from benchmarks.harness import results as harness
from benchmarks.harness.texts import numbered_questions, shakespeare_lines
from benchmarks.search.corpus import synthetic_index
from qrag_integrations.cli_backend import add_backend_arguments, apply_backend, backend_summary
from qrag_integrations.core.compact_scan import EXACT, SCAN_KINDS
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=400_000, help="chunks in the index")
    p.add_argument("--batches", default="1,16,64", help="comma-separated batch sizes")
    p.add_argument("--k", type=int, default=3, help="search steps")
    p.add_argument("--reps", type=int, default=3, help="repetitions per measurement (median)")
    p.add_argument(
        "--checkpoint",
        default=PACKAGED_MINILM,
        help="model searched (default the untrained MiniLM; packaged:qrag-general-minilm fuses "
        "BM25 in its first step)",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--scan",
        choices=SCAN_KINDS,
        default=EXACT,
        help="the search's scan (both ways; 'bf16' scans a bf16 copy for a batch, exactly for one)",
    )
    p.add_argument("--rescore", type=int, default=400, help="compact scans: candidates re-scored")
    add_backend_arguments(p)  # the encoders' inference backend, both ways
    p.add_argument("--out", type=Path, default=RESULTS / "batch_search.json")
    return p.parse_args(argv)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    model = qrag_integrations.load_model(args.checkpoint).eval()
    apply_backend(model, args)
    index = synthetic_index(model, args.size, args.seed, shakespeare_lines())
    searcher = MultiStepSearcher(model, index, SearchSettings(scan=args.scan, rescore=args.rescore))
    sizes = [int(b) for b in args.batches.split(",") if b]
    qs = numbered_questions(max(sizes))
    searcher.search(qs[:2], args.k)  # warm-up
    rows = []
    for b in sizes:
        batch = qs[:b]
        together = statistics.median(
            timed(lambda batch=batch: searcher.search(batch, args.k)) for _ in range(args.reps)
        )
        one_by_one = statistics.median(
            timed(lambda batch=batch: [searcher.search([q], args.k) for q in batch])
            for _ in range(args.reps)
        )
        batched = searcher.search(batch, args.k)
        single = [searcher.search([q], args.k)[0] for q in batch]
        same = statistics.mean(
            [h.chunk.id for h in a] == [h.chunk.id for h in c] for a, c in zip(batched, single)
        )
        row = {
            "batch": b,
            "seconds_batched": together,
            "seconds_one_call_each": one_by_one,
            "questions_per_second_batched": b / together,
            "questions_per_second_one_call_each": b / one_by_one,
            "speedup": one_by_one / together,
            "same_picks": same,
        }
        rows.append(row)
        print(
            f"batch {b}: {row['questions_per_second_batched']:.1f} q/s batched, "
            f"{row['questions_per_second_one_call_each']:.1f} q/s one call each "
            f"({row['speedup']:.2f}x), same picks: {same:.2f}",
            flush=True,
        )
    result = {
        **harness.provenance(argv, args.threads),
        "model": model.config.base_model,
        "checkpoint": args.checkpoint,
        "lexical_depth": model.config.lexical_depth,
        "lexical_steps": model.config.lexical_steps,
        "position_mode": model.config.position_mode.value,
        **backend_summary(model),
        "size": args.size,
        "scan": args.scan,
        "rescore": args.rescore if args.scan != EXACT else None,
        "k": args.k,
        "reps": args.reps,
        "rows": rows,
    }
    harness.write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
