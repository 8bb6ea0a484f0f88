"""Retriever + reader answer accuracy: Q-RAG checkpoints vs dense top-k, BM25 and no retrieval.

A reader LLM (``--reader``, any ``qrag_integrations.llm.factory.build_reader`` spec; default
``local``, SmolLM2-135M-Instruct on the CPU) answers every question from the chunks each method
retrieved (``qrag_training.answering.answer_episodes``: the readers' default prompt, all questions
of a cell and method batched). Chunk order in the prompt (``--reader-order auto``): BabiLong in
document order (the order of events, which the answer depends on), HotpotQA in retrieval order.
Cells:

* ``babilong``: BabiLong-style episodes (``--tasks``, default qa1,qa2; several tasks split the
  ``--n`` samples of a length between them) at each of ``--lengths`` tokens, from the same seeded
  generator and noise pool as ``babilong/run.py`` (``--split test`` = seed 424242, ``val`` =
  555555); metrics: BabiLong's label match (the answer's first sentence names the gold label and
  no other; what BabiLong reports) and strict exact match, also per task (``by_task``). Pool
  embeddings are cached on disk.
* ``hotpotqa``: HotpotQA dev (distractor) questions with two supporting paragraphs, each one
  searching its own ~10 paragraphs; ``--hotpotqa-split val`` is the validation slice of the
  training buckets, ``eval`` the held-out bucket 0 (``qrag_training.data.splits``, as in
  ``hotpotqa/run.py``); metrics: answer EM / F1.

Methods: every ``--checkpoint SUITE:NAME=PATH`` (default: the packaged bAbI demo checkpoint for
babilong, the packaged HotpotQA checkpoint for hotpotqa; the product's multi-step search, ``k``
steps), ``dense`` (top-``k`` by cosine with the untrained MiniLM), ``bm25`` (top-``k``)
and ``none`` (the question alone). ``k``: ``--babilong-steps`` (default 4) and
``--hotpotqa-steps`` (default 2). The reader sees every pick (``--answer-chunks`` to change).

    python -m benchmarks.reader.run --reader local --threads 1
    python -m benchmarks.reader.run --suites hotpotqa --hotpotqa-split eval --hotpotqa-n 300
    python -m benchmarks.reader.run --limit 2 --lengths 1000 --no-plot   # smoke run

Writes ``results/reader_<reader>.json`` (or ``--out``), a markdown table next to it (``.md``) and a
bar chart (``.png``).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from pathlib import Path

from qrag_training.answering import (
    CHUNK_ORDERS,
    ChunkSelection,
    answer_episodes,
    answer_summary,
    chunk_selection_arg,
    load_reader,
    reader_options,
)
from qrag_training.data.babilong import babilong_dataset, tokens_to_sentences
from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.data.noise import MIXED, NoisePool, NoiseSource
from qrag_training.metrics import Retrieval, summarize
from qrag_training.plot import save_figure

from benchmarks.babilong.cells import POOL_MAX, SPLIT_SEEDS, Method
from benchmarks.harness import results as harness
from benchmarks.harness.embedding_cache import CACHE_DIR, pool_embedder
from qrag_integrations.core.atomic import write_json_atomic, write_text_atomic
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.llm import (
    DEFAULT_TEMPLATE,
    Reader,
)

RESULTS = Path(__file__).resolve().parent / "results"

SUITES = ("babilong", "hotpotqa")
#: ``--reader-order auto``: bAbI answers depend on the order of events (on 12 val questions of qa1
#: at 4K tokens, document order raised the demo checkpoint's label match with SmolLM2 from 0.17 to
#: 0.42); HotpotQA paragraphs have no order beyond the retriever's.
AUTO_ORDER = {"babilong": "document", "hotpotqa": "retrieval"}
DEFAULT_CHECKPOINTS = {
    "babilong": {"demo": "packaged:qrag-babi-demo"},
    "hotpotqa": {"qrag": "packaged:qrag-hotpotqa-minilm"},
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suites", default=",".join(SUITES), help="comma-separated: babilong, hotpotqa")
    p.add_argument(
        "--reader",
        default="local",
        help="reader spec (local, local:PATH, openai:BASE_URL#MODEL, vllm:MODEL)",
    )
    p.add_argument(
        "--reader-option",
        dest="reader_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the reader (JSON value, else a string; repeatable)",
    )
    p.add_argument("--reader-batch", type=int, default=16, help="prompts per reader call")
    p.add_argument(
        "--reader-order",
        choices=("auto", *CHUNK_ORDERS),
        default="auto",
        help="chunk order in the prompt; auto: document order for BabiLong, retrieval order for HotpotQA",
    )
    p.add_argument(
        "--answer-chunks",
        type=chunk_selection_arg,
        default=ChunkSelection(),
        help="all, first:N or q>=T (q>=T applies to the checkpoints only; others see all)",
    )
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="SUITE:NAME=PATH",
        help="a Q-RAG checkpoint for one suite (repeatable; default: the packaged ones)",
    )
    p.add_argument("--base", help="model of the dense baseline (default: the packaged MiniLM)")
    p.add_argument(
        "--tasks", default="qa1,qa2", help="comma-separated bAbI tasks (qa1-qa5), sharing --n"
    )
    p.add_argument(
        "--lengths",
        default="4000,32000",
        help="comma-separated BabiLong haystack lengths in tokens",
    )
    p.add_argument("--n", type=int, default=100, help="BabiLong samples per length")
    p.add_argument(
        "--split",
        choices=SPLIT_SEEDS,
        default="test",
        help="BabiLong: test = seed 424242, val = 555555",
    )
    p.add_argument("--babilong-steps", type=int, default=4, help="BabiLong: picks / top-k")
    p.add_argument(
        "--hotpotqa-split",
        choices=("val", "eval"),
        default="val",
        help="val = validation slice of the training buckets; eval = held-out bucket 0",
    )
    p.add_argument("--hotpotqa-n", type=int, default=300, help="HotpotQA questions")
    p.add_argument("--hotpotqa-steps", type=int, default=2, help="HotpotQA: picks / top-k")
    p.add_argument("--limit", type=int, help="at most this many samples per cell (smoke runs)")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=CACHE_DIR,
        help="where BabiLong pool embeddings are cached",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, help="JSON path (default results/reader_<reader>.json)")
    p.add_argument("--no-plot", action="store_true")
    return p.parse_args(argv)


def checkpoints_of(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """``{suite: {name: path}}`` from ``--checkpoint SUITE:NAME=PATH`` (defaults per suite)."""
    given: dict[str, dict[str, str]] = {}
    for item in args.checkpoint:
        suite, _, rest = item.partition(":")
        name, sep, path = rest.partition("=")
        if suite not in SUITES or not sep:
            raise ValueError(
                f"--checkpoint must be SUITE:NAME=PATH with SUITE in {SUITES}; got {item!r}"
            )
        given.setdefault(suite, {})[name] = path
    return {s: given.get(s, DEFAULT_CHECKPOINTS[s]) for s in SUITES}


def babilong_cells(
    args: argparse.Namespace, seed: int
) -> tuple[list[tuple[dict, list[Episode]]], NoisePool]:
    """One cell per length (``n`` samples split over the tasks) and the noise pool they share."""
    tasks = [t for t in args.tasks.split(",") if t.strip()]
    lengths = [int(float(x)) for x in args.lengths.split(",") if x.strip()]
    n = min(args.n, args.limit or args.n)
    pool = NoiseSource(MIXED).pool(min(tokens_to_sentences(max(lengths)), POOL_MAX), seed=seed)
    cells = []
    for tokens in lengths:
        episodes = []
        for i, task in enumerate(tasks):
            count = n // len(tasks) + (i < n % len(tasks))
            episodes += babilong_dataset(task, count, tokens, seed, noise=pool)
        cells.append(
            ({"suite": "babilong", "tasks": tasks, "tokens": tokens, "seed": seed}, episodes)
        )
    return cells, pool


def hotpotqa_cells(args: argparse.Namespace) -> list[tuple[dict, list[Episode]]]:
    n = min(args.hotpotqa_n, args.limit or args.hotpotqa_n)
    episodes = [e for e in load_hotpotqa(args.hotpotqa_split) if len(e.support) >= 2][:n]
    return [({"suite": "hotpotqa", "split": args.hotpotqa_split}, episodes)]


def methods_for(
    checkpoints: dict[str, str], untrained: QRAGModel, pool: NoisePool | None, cache_dir: Path
) -> list[Method]:
    """The checkpoints, dense and BM25 (with a noise pool: its embeddings cached on disk)."""
    methods = []
    for name, path in checkpoints.items():
        model = load_model(path)
        embed = pool_embedder(model, pool.sentences, cache_dir)[0] if pool is not None else None
        methods.append(Method(name, "multi-step", model, embed))
    embed = pool_embedder(untrained, pool.sentences, cache_dir)[0] if pool is not None else None
    return [*methods, Method("dense", "dense", untrained, embed), Method("bm25", "bm25")]


def run_cell(
    info: dict,
    episodes: list[Episode],
    methods: Sequence[Method],
    reader: Reader,
    args: argparse.Namespace,
) -> dict:
    """Retrieve with every method (and none), answer, score."""
    steps = args.babilong_steps if info["suite"] == "babilong" else args.hotpotqa_steps
    order = AUTO_ORDER[info["suite"]] if args.reader_order == "auto" else args.reader_order
    cell = {**info, "n": len(episodes), "steps": steps, "order": order, "methods": {}}
    for method in [*methods, None]:
        started = time.perf_counter()
        results = method.retrieve(episodes, steps) if method else [Retrieval([]) for _ in episodes]
        retrieval_s = time.perf_counter() - started
        selection = (
            args.answer_chunks if method and method.kind == "multi-step" else ChunkSelection()
        )
        started = time.perf_counter()
        chosen, answers = answer_episodes(
            reader, episodes, results, selection, DEFAULT_TEMPLATE, cell["order"], args.reader_batch
        )
        reader_s = time.perf_counter() - started
        row = answer_summary(episodes, answers, label_match=info["suite"] == "babilong")
        row |= summarize(episodes, results)
        if info["suite"] == "babilong" and len(info["tasks"]) > 1:
            row["by_task"] = {
                t: answer_summary(
                    [e for e in episodes if e.meta["task"] == t],
                    [a for e, a in zip(episodes, answers) if e.meta["task"] == t],
                    True,
                )
                for t in info["tasks"]
            }
        row |= {
            "retrieval_seconds": round(retrieval_s, 2),
            "reader_seconds": round(reader_s, 2),
            "reader_seconds_per_prompt": round(reader_s / max(1, len(episodes)), 3),
            "mean_reader_chunks": sum(map(len, chosen)) / max(1, len(chosen)),
            "examples": [
                {"question": e.question, "gold": e.answer, "answer": a}
                for e, a in list(zip(episodes, answers))[:3]
            ],
        }
        cell["methods"][method.name if method else "none"] = row
    line = "  ".join(f"{name} {headline(cell, r)}" for name, r in cell["methods"].items())
    print(f"[{cell_label(cell)}, n={len(episodes)}] {HEADLINE[info['suite']]}: {line}", flush=True)
    return cell


#: What each suite's cells report first.
HEADLINE = {"babilong": "label match / EM", "hotpotqa": "EM / F1"}
#: The metric of each suite in the bar chart.
PLOTTED = {"babilong": "answer_label", "hotpotqa": "answer_em"}


def headline(cell: dict, row: dict) -> str:
    """BabiLong: label match / exact match; HotpotQA: EM / F1."""
    if cell["suite"] == "babilong":
        return f"{row['answer_label']:.3f} / {row['answer_em']:.3f}"
    return f"{row['answer_em']:.3f} / {row['answer_f1']:.3f}"


def cell_label(cell: dict) -> str:
    if cell["suite"] == "babilong":
        return f"babilong {'+'.join(cell['tasks'])} {cell['tokens'] / 1000:g}K"
    return f"hotpotqa {cell['split']}"


def table(result: dict) -> str:
    """Markdown: one row per method, the answer metrics (and fact EM) per cell."""
    cells = result["cells"]
    names = list(dict.fromkeys(n for c in cells for n in c["methods"]))
    head = "| method | " + " | ".join(f"{cell_label(c)} (n={c['n']})" for c in cells) + " |"
    lines = [
        (
            f"Reader: `{result['reader']}`. BabiLong: BabiLong label match / exact match; HotpotQA: answer "
            "EM / F1; the retriever's fact EM in brackets."
        ),
        "",
        head,
        "|---|" + "---:|" * len(cells),
    ]
    for name in names:
        parts = []
        for c in cells:
            r = c["methods"].get(name)
            if r is None:
                parts.append("-")
                continue
            parts.append(headline(c, r) + (f" ({r['fact_em']:.2f})" if name != "none" else ""))
        lines.append(f"| {name} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cells = result["cells"]
    names = list(dict.fromkeys(n for c in cells for n in c["methods"]))
    x = np.arange(len(cells))
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(2.2 * len(cells) + 3, 4))
    for j, name in enumerate(names):
        values = [c["methods"].get(name, {}).get(PLOTTED[c["suite"]], 0.0) for c in cells]
        ax.bar(x + (j - (len(names) - 1) / 2) * width, values, width, label=name)
    ax.set_xticks(x, [cell_label(c) for c in cells])
    ax.set_ylim(0, 1)
    ax.set_ylabel("answer accuracy (BabiLong: label match; HotpotQA: EM)")
    ax.set_title(f"Answer accuracy with reader {result['reader']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    harness.set_threads(args.threads)
    suites = [s for s in args.suites.split(",") if s.strip()]
    checkpoints = checkpoints_of(args)
    reader = load_reader(args.reader, reader_options(args.reader_options))
    reader_name = getattr(reader, "name", args.reader)
    seed = SPLIT_SEEDS[args.split]
    untrained = load_model(args.base or PACKAGED_MINILM)
    result: dict = {
        "benchmark": "reader",
        "reader": reader_name,
        "reader_spec": args.reader,
        "answer_chunks": str(args.answer_chunks),
        "reader_order": args.reader_order,
        "checkpoints": {s: checkpoints[s] for s in suites},
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "cells": [],
    }
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", reader_name).strip("_")
    out = args.out or RESULTS / f"reader_{slug}.json"
    started = time.perf_counter()
    for suite in suites:
        cells, pool = (
            babilong_cells(args, seed) if suite == "babilong" else (hotpotqa_cells(args), None)
        )
        methods = methods_for(checkpoints[suite], untrained, pool, args.cache_dir)
        for info, episodes in cells:
            result["cells"].append(run_cell(info, episodes, methods, reader, args))
            result["seconds"] = round(time.perf_counter() - started, 1)
            write_json_atomic(out, result)  # after every cell: a long run can be read while it goes
    write_reports(result, out, with_plot=not args.no_plot)
    return result


def write_reports(result: dict, out: Path, with_plot: bool) -> None:
    """The markdown table (printed and next to the JSON) and the bar chart."""
    markdown = table(result)
    write_text_atomic(out.with_suffix(".md"), markdown + "\n")
    print(markdown)
    if with_plot:
        plot(result, out.with_suffix(".png"))
    print(f"wrote {out}, {out.with_suffix('.md').name} ({result.get('seconds', 0):.0f} s)")


if __name__ == "__main__":
    main()
