"""Is one checkpoint good everywhere? Every model given, single-step dense top-k and BM25, paired on
the same questions, over cells of different kinds of text:

- ``squad``: out of domain, real single-hop questions over one pool of all paragraphs of SQuAD v2.0
  dev articles 0-17 (file order; 18-34 are reserved and never read; ``--squad-articles 0-8``
  leaves out 9-17, which the default's lexical gate learned from), hit@1 / hit@3;
- ``techdocs``: technical documentation, hand-written developer questions over one pool of the
  prose paragraphs of installed packages' PyPI descriptions (:mod:`benchmarks.general.techdocs`;
  ``--split`` picks the questions of its packages), hit@1 / hit@3;
- ``hotpotqa``: multi-hop Wikipedia, 10 paragraphs per question (``--split val``: the validation
  slice of the training buckets; ``test``: bucket 0), EM@2 / EM@4;
- ``babilong-<noise>-<tokens>``: bAbI qa1-qa5 hidden in noise prose (``mixed`` = the training
  noise; ``squad``, ``essays`` and ``wiki``: noise sources no training run used,
  :mod:`benchmarks.harness.noise_sources`; ``squad`` for validation, the others for held-out
  reports; ``wiki``, HotpotQA's test bucket, is refused outside ``--split test``), fact EM at k = the number of facts and at 6 picks;
- ``ruler-<variant>-<tokens>``: RULER needles, EM at k = needles and at 5 picks.

A third baseline fuses dense and BM25 rankings (``dense+bm25``: reciprocal-rank fusion, as
LangChain's ``EnsembleRetriever``; :func:`qrag_training.baselines.fuse`). Each method is compared
with dense top-k of the untrained encoder per question (``paired``: mean difference and bootstrap
95% interval; ``worse`` = dense better beyond the interval); the summary table also pairs the
default with the best of the three baselines. The JSON goes
to ``--out`` and its plot (:func:`benchmarks.general.report.plot`) beside it as a PNG.

    python -m benchmarks.general.run --model demo=packaged:qrag-babi-demo \\
        --cells squad,hotpotqa,babilong-mixed-4000,babilong-squad-4000 --split val

Validation uses seed 555555 for generated cells; ``--split test`` needs an explicit ``--seed`` that
no earlier run has used.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qrag_training.baselines import (
    HYBRID_DEPTH,
    ChunkEmbedder,
    bm25_retrieve,
    dense_retrieve,
    distinct_text_embedder,
    fuse,
    greedy_retrieve,
)
from qrag_training.data.babilong import babilong_dataset
from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.data.ruler import ruler_dataset
from qrag_training.data.squad import VALIDATION_ARTICLES, load_squad_ood
from qrag_training.metrics import Retrieval
from qrag_training.paired import paired_bootstrap

from benchmarks.general.report import plot
from benchmarks.general.techdocs import load_techdocs
from benchmarks.harness import results as harness
from benchmarks.harness.model_specs import checkpoint_of, load_with_settings
from benchmarks.harness.noise_sources import UNSEEN_NOISE, noise_split_refusal
from benchmarks.harness.squad_articles import article_range
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy

RESULTS = Path(__file__).resolve().parent / "results"

VAL_SEED = 555_555
TASKS = ["qa1", "qa2", "qa3", "qa4", "qa5"]
DENSE, BM25, HYBRID = "dense", "bm25", "dense+bm25"
#: Picks per cell kind, and the pick budgets its metrics read (``facts`` = as many as the question has).
PICKS = {"squad": 3, "techdocs": 3, "hotpotqa": 4, "babilong": 6, "ruler": 5}
HITS: list[tuple[str, int | str]] = [("hit@1", 1), ("hit@3", 3)]
METRICS: dict[str, list[tuple[str, int | str]]] = {
    "squad": HITS,
    "techdocs": HITS,
    "hotpotqa": [("em@2", 2), ("em@4", 4)],
    "babilong": [("em@facts", "facts"), ("em@6", 6)],
    "ruler": [("em@facts", "facts"), ("em@5", 5)],
}


def cell_episodes(
    cell: str,
    split: str,
    n: int,
    seed: int,
    skip: int = 0,
    articles: tuple[int, int] = (0, VALIDATION_ARTICLES),
) -> list[Episode]:
    """The episodes of a cell (``n``: questions for squad and techdocs, per task for babilong,
    episodes for ruler; ``skip``: HotpotQA questions passed over first, for a slice no earlier
    report read; ``articles``: the SQuAD articles pooled, half-open)."""
    kind, *rest = cell.split("-")
    if kind == "squad":
        lo, hi = articles
        return load_squad_ood(articles=articles, group_size=hi - lo, n=n, seed=seed)
    if kind == "techdocs":
        return load_techdocs(split, n=n, seed=seed)
    if kind == "hotpotqa":
        split_name = "val" if split == "val" else "eval"
        return load_hotpotqa(split=split_name, limit=None if n is None else skip + n)[skip:]
    if kind == "babilong":
        noise, tokens = rest[0], int(rest[1])
        pool = UNSEEN_NOISE[noise]() if noise in UNSEEN_NOISE else None
        return babilong_dataset(
            TASKS,
            n=n * len(TASKS),
            target_tokens=tokens,
            seed=seed,
            noise_kind="mixed" if noise in UNSEEN_NOISE else noise,
            noise=pool,
        )
    if kind == "ruler":
        variant, tokens = "_".join(["niah", rest[0]]), int(rest[1])
        return ruler_dataset(variant, n=n, target_tokens=tokens, seed=seed)
    raise ValueError(f"unknown cell {cell!r}")


def scores(
    episodes: Sequence[Episode], results: Sequence[Retrieval], kind: str
) -> dict[str, list[float]]:
    """Per-question 0/1 of every metric of the cell kind."""
    out: dict[str, list[float]] = {}
    for name, k in METRICS[kind]:
        out[name] = [
            float(set(e.support) <= set(r.picked[: len(e.support) if k == "facts" else int(k)]))
            for e, r in zip(episodes, results)
        ]
    return out


def run_cell(
    cell: str,
    episodes: list[Episode],
    models: dict[str, QRAGModel],
    embedders: dict[str, Callable],
    searches: dict[str, SearchPolicy] | None = None,
) -> dict:
    """Every model, dense and BM25 on one cell: metrics, per-task metrics, paired differences."""
    kind = cell.split("-")[0]
    picks = PICKS[kind]
    per_method: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    for name, model in models.items():
        t0 = time.perf_counter()
        policy = (searches or {}).get(name)
        results = greedy_retrieve(model, episodes, picks, embed=embedders[name], policy=policy)
        seconds[name] = time.perf_counter() - t0
        per_method[name] = scores(episodes, results, kind)
    t0 = time.perf_counter()
    per_method[DENSE] = scores(
        episodes,
        dense_retrieve(models["untrained"], episodes, picks, embed=embedders["untrained"]),
        kind,
    )
    seconds[DENSE] = time.perf_counter() - t0
    t0 = time.perf_counter()
    bm25 = bm25_retrieve(episodes, HYBRID_DEPTH)
    per_method[BM25] = scores(episodes, [Retrieval(r.picked[:picks]) for r in bm25], kind)
    seconds[BM25] = time.perf_counter() - t0
    dense_deep = dense_retrieve(
        models["untrained"], episodes, HYBRID_DEPTH, embed=embedders["untrained"]
    )
    per_method[HYBRID] = scores(episodes, fuse(dense_deep, bm25, picks), kind)
    table = {m: {k: sum(v) / len(v) for k, v in s.items()} for m, s in per_method.items()}
    paired = {
        m: {k: paired_bootstrap(s[k], per_method[DENSE][k]).to_dict() for k in s}
        for m, s in per_method.items()
        if m != DENSE
    }
    by_task: dict[str, dict[str, dict[str, float]]] = {}
    by_task_paired: dict[str, dict[str, dict[str, dict]]] = {}
    if kind == "babilong":
        for task in TASKS:
            rows = [i for i, e in enumerate(episodes) if e.meta.get("task") == task]
            if rows:
                by_task[task] = {
                    m: {k: sum(v[i] for i in rows) / len(rows) for k, v in s.items()}
                    for m, s in per_method.items()
                }
                by_task_paired[task] = {
                    m: {
                        k: paired_bootstrap(
                            [v[i] for i in rows], [per_method[DENSE][k][i] for i in rows]
                        ).to_dict()
                        for k, v in s.items()
                    }
                    for m, s in per_method.items()
                    if m != DENSE
                }
    return {
        "cell": cell,
        "n": len(episodes),
        "metrics": table,
        "paired_vs_dense": paired,
        "by_task": by_task,
        "by_task_paired_vs_dense": by_task_paired,
        "per_question": per_method,
        "seconds": seconds,
    }


def print_cell(result: dict) -> None:
    for method, values in result["metrics"].items():
        cells = []
        for k, v in values.items():
            p = result["paired_vs_dense"].get(method, {}).get(k)
            tag = (
                ""
                if p is None
                else f" ({p['diff']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}] {p['verdict']})"
            )
            cells.append(f"{k} {v:.3f}{tag}")
        print(f"  {method:>12}: " + "; ".join(cells), flush=True)


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=CHECKPOINT[:FIELD=VALUE,...]",
        help="a checkpoint folder, packaged name or encoder, optionally with search settings "
        "(e.g. untrained_w1=packaged:all-MiniLM-L6-v2:question_weight=1); "
        "'untrained' (the packaged MiniLM as it ships) always runs",
    )
    p.add_argument(
        "--base",
        default=PACKAGED_MINILM,
        help="the untrained encoder: 'untrained' (multi-step) and dense top-k run with it",
    )
    p.add_argument("--cells", default="squad,hotpotqa,babilong-mixed-4000,babilong-squad-4000")
    p.add_argument("--split", choices=["val", "test"], default="val")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"seed of generated cells and the SQuAD / techdocs samples (val: {VAL_SEED})",
    )
    p.add_argument("--squad-n", type=int, default=400, help="SQuAD questions (a seeded sample)")
    p.add_argument(
        "--squad-articles",
        type=article_range,
        default=(0, VALIDATION_ARTICLES),
        metavar="A-B",
        help="SQuAD articles pooled (default 0-17; 0-8 when a checkpoint's gate learned from 9-17)",
    )
    p.add_argument(
        "--techdocs-n",
        type=int,
        default=None,
        help="techdocs questions (a seeded sample; default: every question of the split)",
    )
    p.add_argument(
        "--hotpotqa-n", type=int, default=None, help="HotpotQA questions (default: the whole split)"
    )
    p.add_argument(
        "--hotpotqa-skip",
        type=int,
        default=0,
        help="HotpotQA questions passed over first (a held-out slice no earlier report used)",
    )
    p.add_argument("--babi-n", type=int, default=30, help="episodes per bAbI task")
    p.add_argument("--ruler-n", type=int, default=50, help="episodes per RULER cell")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=RESULTS / "general_val.json")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG beside --out (report.plot)")
    args = p.parse_args(argv)
    if args.split == "test" and args.seed is None:
        p.error("--split test needs an explicit --seed that no earlier run has used")
    noises = [c.split("-")[1] for c in args.cells.split(",") if c.startswith("babilong-")]
    if refusal := noise_split_refusal(noises, args.split):
        p.error(refusal)
    seed = VAL_SEED if args.seed is None else args.seed
    harness.set_threads(args.threads)
    specs = {"untrained": args.base, **dict(m.split("=", 1) for m in args.model)}
    loaded = {name: load_with_settings(spec) for name, spec in specs.items()}
    models = {name: model for name, (model, _) in loaded.items()}
    searches = {name: search for name, (_, search) in loaded.items()}
    by_encoder: dict[tuple[str, int], ChunkEmbedder] = {}  # one per checkpoint and chunk budget
    embedders = {
        name: by_encoder.setdefault(
            (checkpoint_of(specs[name]), model.config.max_chunk_tokens),
            distinct_text_embedder(model, batch_size=64),
        )
        for name, model in models.items()
    }
    sizes = {
        "squad": args.squad_n,
        "techdocs": args.techdocs_n,
        "hotpotqa": args.hotpotqa_n,
        "babilong": args.babi_n,
        "ruler": args.ruler_n,
    }
    cells = []
    for cell in args.cells.split(","):
        episodes = cell_episodes(
            cell,
            args.split,
            sizes[cell.split("-")[0]],
            seed,
            skip=args.hotpotqa_skip,
            articles=args.squad_articles,
        )
        print(f"{cell}: {len(episodes)} questions", flush=True)
        cells.append(run_cell(cell, episodes, models, embedders, searches))
        print_cell(cells[-1])
    result = {
        "benchmark": "general",
        "split": args.split,
        "seed": seed,
        "hotpotqa_skip": args.hotpotqa_skip,
        "squad_articles": f"{args.squad_articles[0]}-{args.squad_articles[1] - 1}",
        "models": specs,
        "cells": cells,
        "machine": harness.machine_info(args.threads, "cpu"),
        "code": harness.code_version(),
        "command": harness.command_line(list(argv) if argv is not None else None),
    }
    harness.write_json(args.out, result)
    if not args.no_plot:
        plot(result, args.out.with_suffix(".png"))
    return result


if __name__ == "__main__":
    main()
