"""Next-hop training speed on ~40-chunk questions: today's step vs the frozen-layer cache, sampled
negatives and bfloat16 autocast (fast on CPUs with AVX512-BF16 / AMX), side by side in one run (issue "Your own corpus": >= 5x updates per second).

Questions: SQuAD v2.0 dev articles 0-11 (file order; out-of-domain validation data, never shipped),
one article per episode (its ~40 paragraphs are the chunks, the question's paragraph the support),
drawn in one fixed order that every variant sees. Model: MiniLM with its top 2 layers training,
cosine Q, no positions, 192-token budgets (``preset=custom_cpu``). Each variant starts from the
same weights and takes ``--updates`` optimiser steps of ``--questions`` questions; the time of
every update is recorded, cache fills included (a question's article is new the first time).

    python -m benchmarks.train_speed.run --updates 6 --threads 1
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from qrag_training.data.squad import load_squad_ood
from qrag_training.next_hop import NextHopConfig, NextHopLearner

from benchmarks.harness import results as harness
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.precision import bf16_is_fast

RESULTS = Path(__file__).resolve().parent / "results"

#: The variants: name -> NextHopConfig fields on top of the common ones.
VARIANTS = {
    "every chunk, every layer (today)": {},
    "frozen-layer cache": {"frozen_cache_mb": 2048},
    "cache + 8 hard + 4 random negatives": {
        "frozen_cache_mb": 2048,
        "hard_negatives": 8,
        "random_negatives": 4,
    },
    "cache + negatives + bf16 autocast": {
        "frozen_cache_mb": 2048,
        "hard_negatives": 8,
        "random_negatives": 4,
        "autocast": "bf16",
    },
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--updates", type=int, default=6, help="optimiser steps per variant")
    p.add_argument("--questions", type=int, default=8, help="questions per step")
    p.add_argument("--articles", type=int, default=12, help="SQuAD dev articles 0..N-1 (<= 12)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "train_speed.json")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if not 1 <= args.articles <= 12:
        raise SystemExit("--articles must be 1..12 (articles 12-17 are the held-out side)")
    harness.set_threads(args.threads)
    episodes = load_squad_ood(articles=(0, args.articles), group_size=1)
    order = np.random.default_rng(args.seed).permutation(len(episodes))
    stream = [episodes[i] for i in order[: args.updates * args.questions]]
    chunks = [len(e.chunks) for e in stream]
    print(
        f"{len(episodes)} questions, {statistics.mean(chunks):.1f} chunks per question", flush=True
    )
    base = QRAGModel.from_base(
        QRAGConfig(trainable_layers=2, normalize=True, max_state_tokens=192, max_chunk_tokens=192)
    )
    rows = {}
    for name, extra in VARIANTS.items():
        torch.manual_seed(args.seed)
        learner = NextHopLearner(
            copy.deepcopy(base),
            NextHopConfig(questions_per_step=args.questions, states_per_question=1, **extra),
            seed=args.seed,
        )
        feed = iter(stream)
        seconds, losses = [], []
        for _ in range(args.updates):
            started = time.perf_counter()
            out = learner.step(lambda feed=feed: next(feed))
            seconds.append(time.perf_counter() - started)
            losses.append(out["loss"])
        cache = learner.chunk_cache
        rows[name] = {
            "seconds_per_update": seconds,
            "mean_seconds": statistics.mean(seconds),
            "mean_seconds_after_first": statistics.mean(seconds[1:]) if len(seconds) > 1 else None,
            "loss": losses,
            "cache_hits": cache.hits if cache else None,
            "cache_misses": cache.misses if cache else None,
            "cache_mb": round(cache.megabytes, 1) if cache else None,
        }
        print(f"{name}: {statistics.mean(seconds):.2f} s/update", flush=True)
    today = rows["every chunk, every layer (today)"]["mean_seconds"]
    for row in rows.values():
        row["speedup"] = today / row["mean_seconds"]
    result = {
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "bf16_is_fast": bf16_is_fast("cpu"),
        "questions": len(stream),
        "mean_chunks_per_question": statistics.mean(chunks),
        "variants": rows,
    }
    print("\n| variant | s / update | after the first | updates / s vs today |")
    print("|---|---:|---:|---:|")
    for name, row in rows.items():
        after = row["mean_seconds_after_first"]
        print(f"| {name} | {row['mean_seconds']:.2f} | {after:.2f} | {row['speedup']:.2f}x |")
    harness.write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
