"""BabiLong qa1-qa5 and RULER needle-in-a-haystack from 1K to 1M tokens: Q-RAG vs baselines.

Data (our own generators, nothing downloaded): seeded bAbI-style stories (qa1-qa5; ``qa2-moves``, a
second qa2-style generator whose object holder moves before and after taking it, is a task of
``--tasks`` too) and RULER-style
needles (``niah_single``, ``niah_multikey``, ``niah_multivalue``) hidden among noise sentences at
the paper's scale of 25 tokens per sentence (1K tokens = 40 sentences, 1M = 40,000). All the noise
of a run comes from one fixed pool, ``NoiseSource("mixed").pool(size, seed)``: consecutive
Shakespeare / KJV sentences, ``size`` = the longest haystack, at most :data:`POOL_MAX` sentences
(1M tokens; a longer haystack repeats the pool). ``--noise squad|essays|wiki|foldoc`` takes the
pool from a source no training run used instead (its first ``size`` sentences;
:mod:`benchmarks.harness.noise_sources`; squad and essays hold fewer than 1M tokens, so long
haystacks repeat them; wiki is HotpotQA's test bucket: ``--split test`` only). Each model embeds the pool once; the embeddings
are cached on disk (``benchmarks/.cache/``, keyed by the chunk encoder's fingerprint and the
texts), so a sample only embeds its own story sentences. Every length asks the same questions
(the stories depend on the seed, not on the length).

Splits: ``--split test`` is seed 424242 (used by neither training, ``seed*1000+pass``, nor
checkpoint selection); ``--split val`` is seed 555555 (choose checkpoints and settings there).
The trainer's own validation set (``eval_seed`` 999999) is not used here.

Methods, all run in one process on the same episodes:

* every ``--checkpoint NAME=PATH``: Q-RAG multi-step search with the product's own search
  (``qrag_training.baselines.greedy_retrieve`` -> ``MultiStepSearcher``), ``--steps`` picks;
* ``untrained``: the untrained packaged MiniLM (``packaged:all-MiniLM-L6-v2``,
  or ``--base``), the same search;
* ``dense``: single-step top-k by cosine with the untrained MiniLM's encoder;
* ``bm25``: single-step BM25 top-k (``bm25s``, English stop words).

Metrics per cell (task x length): ``em@facts`` (every supporting fact among the first
``|support|`` picks: 1 fact for qa1 / qa4 / qa5 and the single / multi-key needle, 2 for qa2,
3 for qa3, 4 needles for multi-value), ``em@budget`` (among ``--steps`` picks, default 6),
``recall@facts`` / ``recall@budget`` (share of supporting facts found; the needle recall of RULER),
and for the checkpoints what the search returns with each ``--stop-thresholds`` value (EM, recall,
mean steps).
A greedy search's first ``j`` picks are what a ``j``-step search picks, and a ``stop_threshold``
search returns the picks before the first Q-value below it, so one ``--steps`` search per sample
gives every column.

    python -m benchmarks.babilong.run --mode quick --checkpoint demo=packaged:qrag-babi-demo
    python -m benchmarks.babilong.run --mode full --split test --checkpoint new=PATH --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from qrag_training.data.babi_world import TASKS
from qrag_training.data.babilong import STORY_TASKS, babilong_dataset, tokens_to_sentences
from qrag_training.data.episode import Episode
from qrag_training.data.noise import MIXED, NoisePool, NoiseSource
from qrag_training.data.ruler import NIAH_MULTIKEY, NIAH_MULTIVALUE, NIAH_SINGLE, ruler_dataset
from qrag_training.metrics import Retrieval, em_recall, fact_metrics, stop_metrics

from benchmarks.babilong.cells import POOL_MAX, SPLIT_SEEDS, Method
from benchmarks.babilong.report import plot, report
from benchmarks.harness import results as harness
from benchmarks.harness.embedding_cache import CACHE_DIR, pool_embedder
from benchmarks.harness.model_specs import load_with_model_settings
from benchmarks.harness.noise_sources import UNSEEN_NOISE, noise_split_refusal
from qrag_integrations.core.atomic import write_json_atomic
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.loading import load_model

RESULTS = Path(__file__).resolve().parent / "results"

RULER_VARIANTS = (NIAH_SINGLE, NIAH_MULTIKEY, NIAH_MULTIVALUE)
#: Baselines run beside the checkpoints (``--baselines``): see the module docstring.
BASELINES = ("untrained", "dense", "bm25")
#: Haystacks of at least this many tokens get ``--n-large`` samples.
LARGE = 1_000_000
MODES = {
    "quick": {
        "lengths": (1000, 4000, 16000),
        "n": 20,
        "n_large": 5,
        "ruler_lengths": (4000, 16000),
        "ruler_n": 20,
    },
    "full": {
        "lengths": (1000, 4000, 16000, 64000, 128000, 1_000_000),
        "n": 100,
        "n_large": 25,
        "ruler_lengths": (4000, 16000, 64000, 128000),
        "ruler_n": 100,
    },
}


def cell_metrics(
    episodes: Sequence[Episode], results: Sequence[Retrieval], k: int, thresholds: Sequence[float]
) -> dict:
    """EM and recall at ``|support|`` and at ``k`` picks; for each of ``thresholds``, the stop rule's."""
    gold = [set(e.support) for e in episodes]
    picks = [r.picked for r in results]
    out: dict = {}
    out["em@facts"], out["recall@facts"] = em_recall(
        [p[: len(g)] for p, g in zip(picks, gold)], gold
    )
    out["em@budget"], out["recall@budget"] = em_recall([p[:k] for p in picks], gold)
    # per sample (0/1), for paired comparisons of methods on the same samples
    out["per_sample"] = {
        "em@facts": [int(fact_metrics(p[: len(g)], g)[0]) for p, g in zip(picks, gold)],
        "em@budget": [int(fact_metrics(p[:k], g)[0]) for p, g in zip(picks, gold)],
    }
    if thresholds:
        out["stop"] = [
            stop_metrics(picks, [r.scores for r in results], gold, t) for t in thresholds
        ]
    return out


def noise_pool(noise: str, size: int, seed: int) -> NoisePool:
    """The run's noise: ``size`` sentences of the training noise from a start chosen by ``seed``
    (``mixed``), or the first ``size`` of a source no training run used (``UNSEEN_NOISE``)."""
    if noise == MIXED:
        return NoiseSource(MIXED).pool(size, seed=seed)
    source = UNSEEN_NOISE[noise]()
    return NoisePool(source.sentences[:size], kind=source.kind)


def cell_episodes(
    suite: str, task: str, n: int, tokens: int, seed: int, pool: NoisePool
) -> list[Episode]:
    if suite == "babilong":
        return babilong_dataset(task, n, tokens, seed, noise=pool)
    return ruler_dataset(task, n, tokens, seed, noise=pool)


def run_cell(
    suite: str,
    task: str,
    tokens: int,
    n: int,
    methods: Sequence[Method],
    args: argparse.Namespace,
    pool: NoisePool,
) -> dict:
    episodes = cell_episodes(suite, task, n, tokens, args.seed, pool)
    cell = {
        "suite": suite,
        "task": task,
        "tokens": tokens,
        "n": len(episodes),
        "chunks": statistics.mean(len(e.chunks) for e in episodes),
        "facts": statistics.mean(len(e.support) for e in episodes),
        "methods": {},
    }
    for m in methods:
        fresh = m.embed.fresh if m.embed is not None else 0
        started = time.perf_counter()
        results = m.retrieve(episodes, args.steps)
        row = cell_metrics(episodes, results, args.steps, args.stop_thresholds if m.stop else ())
        row["seconds"] = round(time.perf_counter() - started, 2)
        if m.embed is not None:
            row["embedded_per_sample"] = (m.embed.fresh - fresh) / len(episodes)
        cell["methods"][m.name] = row
    line = "  ".join(
        f"{name} {r['em@facts']:.2f}/{r['em@budget']:.2f}" for name, r in cell["methods"].items()
    )
    secs = sum(r["seconds"] for r in cell["methods"].values())
    print(
        f"[{suite} {task} {tokens} tok, n={len(episodes)}] EM@facts/EM@{args.steps}: {line}  ({secs:.0f} s)",
        flush=True,
    )
    return cell


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--mode",
        choices=MODES,
        default="quick",
        help="quick: 1K-16K tokens, 20 samples per cell; full: 1K-1M tokens, 100 per cell (25 at 1M+)",
    )
    p.add_argument(
        "--split", choices=SPLIT_SEEDS, default="test", help="test = seed 424242, val = seed 555555"
    )
    p.add_argument("--seed", type=int, help="episode and noise-pool seed (overrides --split's)")
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="NAME=CHECKPOINT[:FIELD=VALUE,...]: a Q-RAG checkpoint, optionally with search "
        "settings changed (e.g. w0=packaged:qrag-general-minilm:question_weight=0); repeatable; "
        "default: demo=packaged:qrag-babi-demo",
    )
    p.add_argument(
        "--base", help="the untrained model searched multi-step (default: the packaged MiniLM)"
    )
    p.add_argument(
        "--noise",
        choices=[MIXED, *UNSEEN_NOISE],
        default=MIXED,
        help="noise prose: the training noise (mixed, seeded) or a source no training run used "
        "(benchmarks/harness/noise_sources.py; its first sentences, in file order)",
    )
    p.add_argument(
        "--tasks",
        default=",".join(TASKS),
        help=f"comma-separated story tasks of {', '.join(STORY_TASKS)} ('' for none)",
    )
    p.add_argument(
        "--lengths", help="comma-separated haystack lengths in tokens (default: the mode's)"
    )
    p.add_argument("--n", type=int, help="samples per cell (default: the mode's)")
    p.add_argument(
        "--n-large", type=int, help=f"samples per cell at {LARGE:,}+ tokens (default: the mode's)"
    )
    p.add_argument(
        "--ruler",
        default=",".join(RULER_VARIANTS),
        help="comma-separated RULER variants ('' for none)",
    )
    p.add_argument(
        "--ruler-lengths", help="comma-separated RULER lengths in tokens (default: the mode's)"
    )
    p.add_argument("--ruler-n", type=int, help="samples per RULER cell (default: the mode's)")
    p.add_argument(
        "--baselines",
        default=",".join(BASELINES),
        help="comma-separated baselines to run beside the checkpoints ('' for none: a checkpoint "
        "choice on the val split needs no baselines)",
    )
    p.add_argument(
        "--steps", type=int, default=6, help="step budget of the multi-step methods, k of top-k"
    )
    p.add_argument(
        "--stop-thresholds",
        default="0.5",
        help="comma-separated stop_threshold values reported for the checkpoints",
    )
    p.add_argument(
        "--cache-dir", type=Path, default=CACHE_DIR, help="where pool embeddings are cached"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--out", type=Path, help="JSON path (default results/babilong_<split>_<mode>.json)"
    )
    p.add_argument("--no-plot", action="store_true")
    return p.parse_args(argv)


def _ints(text: str | None, default: Sequence[int]) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()] if text else list(default)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    mode = MODES[args.mode]
    args.seed = SPLIT_SEEDS[args.split] if args.seed is None else args.seed
    args.stop_thresholds = [float(x) for x in args.stop_thresholds.split(",") if x.strip()]
    split = args.split if args.seed == SPLIT_SEEDS[args.split] else f"seed{args.seed}"
    lengths, ruler_lengths = (
        _ints(args.lengths, mode["lengths"]),
        _ints(args.ruler_lengths, mode["ruler_lengths"]),
    )
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if unknown_tasks := sorted(set(tasks) - set(STORY_TASKS)):
        raise SystemExit(
            f"bench_babilong: unknown task(s) {', '.join(unknown_tasks)}; "
            f"choose from {', '.join(STORY_TASKS)}"
        )
    if refusal := noise_split_refusal([args.noise], args.split):
        raise SystemExit(f"bench_babilong: {refusal}")
    variants = [v for v in args.ruler.split(",") if v.strip()]
    n, n_large, ruler_n = (
        args.n or mode["n"],
        args.n_large or mode["n_large"],
        args.ruler_n or mode["ruler_n"],
    )
    checkpoints = dict(c.split("=", 1) for c in args.checkpoint) or {
        "demo": "packaged:qrag-babi-demo"
    }

    longest = max([t for t in lengths if tasks] + [t for t in ruler_lengths if variants])
    size = min(tokens_to_sentences(longest), POOL_MAX)
    pool = noise_pool(args.noise, size, args.seed)
    baselines = [b.strip() for b in args.baselines.split(",") if b.strip()]
    unknown = sorted(set(baselines) - set(BASELINES))
    if unknown:
        raise SystemExit(
            f"bench_babilong: unknown baseline(s) {', '.join(unknown)}; choose from {', '.join(BASELINES)}"
        )
    methods: list[Method] = []
    pool_info: dict[str, dict] = {}
    for name, path in checkpoints.items():
        model = load_with_model_settings(path)
        embed, pool_info[name] = pool_embedder(model, pool.sentences, args.cache_dir)
        methods.append(Method(name, "multi-step", model, embed, stop=True))
    if {"untrained", "dense"} & set(baselines):
        untrained = load_model(args.base or PACKAGED_MINILM)
        embed, pool_info["untrained"] = pool_embedder(untrained, pool.sentences, args.cache_dir)
        methods += [
            Method(name, kind, untrained, embed)
            for name, kind in (("untrained", "multi-step"), ("dense", "dense"))
            if name in baselines
        ]
    if "bm25" in baselines:
        methods.append(Method("bm25", "bm25"))
    for name, info in pool_info.items():
        print(
            f"pool of {info['pool_texts']} sentences for {name}: "
            f"{'read from the cache' if info['cache_hit'] else 'embedded and cached'} in {info['seconds']:.0f} s",
            flush=True,
        )

    result: dict = {
        "benchmark": "babilong",
        "split": split,
        "seed": args.seed,
        "mode": args.mode,
        "steps": args.steps,
        "stop_thresholds": args.stop_thresholds,
        "checkpoints": checkpoints,
        "base": args.base or PACKAGED_MINILM,
        "methods": {m.name: m.kind for m in methods},
        "pool": {
            "kind": pool.kind,
            "sentences": len(pool),
            "seed": args.seed,
            "tokens_per_sentence": 25,
        },
        "pool_embedding": pool_info,
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "configs": {
            m.name: m.model.config.to_dict() | {"extra": None}
            for m in methods
            if m.kind == "multi-step"
        },
        "cells": [],
    }
    out = args.out or RESULTS / f"babilong_{split}_{args.mode}.json"
    started = time.perf_counter()
    plan = [("babilong", t, L, n_large if L >= LARGE else n) for L in lengths for t in tasks]
    plan += [
        ("ruler", v, L, n_large if L >= LARGE else ruler_n) for L in ruler_lengths for v in variants
    ]
    for suite, task, tokens, count in plan:
        result["cells"].append(run_cell(suite, task, tokens, count, methods, args, pool))
        result["seconds"] = round(time.perf_counter() - started, 1)
        write_json_atomic(out, result)  # after every cell: a long run can be read while it goes
    print(report(result))
    if not args.no_plot:
        plot(result, out.with_suffix(".png"))
    print(f"wrote {out} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
