"""What the longer default token budgets cost: 64 (the old default) vs 128 vs 256 tokens.

On real HotpotQA paragraphs (validation slice; median 112 MiniLM tokens, so 64 cuts most of
them), with the untrained MiniLM, measured side by side in one run:

* index build: seconds per paragraph for ``embed_chunks`` at each chunk budget;
* one question's 3-step search over a pooled index of those paragraphs (state encodings at each
  state budget, plus the scans), median over the questions.

    python -m benchmarks.token_budgets.run --threads 1

Writes ``benchmarks/token_budgets/results/token_budgets.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from qrag_training.data.hotpotqa import load_hotpotqa

from benchmarks.harness import results as harness
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.search import MultiStepSearcher

RESULTS = Path(__file__).resolve().parent / "results"

BUDGETS = (64, 128, 256)


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--questions", type=int, default=40, help="questions (their paragraphs form the index)"
    )
    p.add_argument("--k", type=int, default=3, help="search steps")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(RESULTS / "token_budgets.json"))
    args = p.parse_args(argv)
    harness.set_threads(args.threads)
    episodes = load_hotpotqa("val", limit=args.questions)
    texts = list(dict.fromkeys(t for e in episodes for t in e.chunks))
    base = load_model(PACKAGED_MINILM)
    rows = []
    for budget in BUDGETS:
        config = dataclasses.replace(base.config, max_chunk_tokens=budget, max_state_tokens=budget)
        model = QRAGModel(config, base.state_encoder, base.chunk_encoder, base.tokenizer)
        model.embed_chunks(texts[:32])  # warm-up
        t0 = time.perf_counter()
        emb = model.embed_chunks(texts, batch_size=32)
        build = (time.perf_counter() - t0) / len(texts)
        index = ChunkIndex(emb.shape[1])
        index.add(texts, emb)
        searcher = MultiStepSearcher(model, index)
        searcher.search([episodes[0].question], args.k)  # warm-up
        times = []
        for e in episodes:
            t0 = time.perf_counter()
            searcher.search([e.question], args.k)
            times.append(time.perf_counter() - t0)
        rows.append(
            {
                "budget_tokens": budget,
                "build_ms_per_paragraph": 1000 * build,
                "search_ms_median": 1000 * statistics.median(times),
            }
        )
        print(
            f"budget {budget:>3}: build {1000 * build:6.1f} ms/paragraph, {args.k}-step search "
            f"{rows[-1]['search_ms_median']:7.1f} ms (median of {len(times)})",
            flush=True,
        )
    for row in rows:
        row["build_ratio_vs_64"] = row["build_ms_per_paragraph"] / rows[0]["build_ms_per_paragraph"]
        row["search_ratio_vs_64"] = row["search_ms_median"] / rows[0]["search_ms_median"]
    result = {
        "benchmark": "token_budgets",
        "paragraphs": len(texts),
        "questions": len(episodes),
        "k": args.k,
        "data": "HotpotQA validation slice (split=val)",
        "rows": rows,
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
    }
    harness.write_json(args.out, result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
