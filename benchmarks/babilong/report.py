"""Tables and the length plot of a ``babilong/run.py`` result (no number typed by hand).

    python -m benchmarks.babilong.report benchmarks/babilong/results/babilong_test_full.json [more.json] [--plot out.png]

Tables: the qa1-qa5 average per method and length (EM at the number of facts / at the step
budget), each task, what ``stop_threshold`` returns for the checkpoints, RULER needle recall, and
the wall time per method and length.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path

from qrag_training.plot import save_figure


def _tokens(t: int) -> str:
    return f"{t // 1_000_000}M" if t >= 1_000_000 and t % 1_000_000 == 0 else f"{t / 1000:g}K"


def _cells(result: dict, suite: str) -> list[dict]:
    return [c for c in result["cells"] if c["suite"] == suite]


def _grid(cells: list[dict]) -> tuple[list[str], list[int]]:
    tasks = list(dict.fromkeys(c["task"] for c in cells))
    lengths = sorted({c["tokens"] for c in cells})
    return tasks, lengths


def averages(
    result: dict, suite: str, value: Callable[[dict], float]
) -> dict[str, dict[int, float]]:
    """Per method and length: the mean over tasks of ``value(method row)`` (lengths where every
    task ran only)."""
    cells = _cells(result, suite)
    tasks, lengths = _grid(cells)
    out: dict[str, dict[int, float]] = {}
    for name in result["methods"]:
        for length in lengths:
            rows = [
                c["methods"][name] for c in cells if c["tokens"] == length and name in c["methods"]
            ]
            if len(rows) == len(tasks):
                out.setdefault(name, {})[length] = statistics.mean(value(r) for r in rows)
    return out


def _samples(cells: list[dict], length: int) -> str:
    ns = sorted({c["n"] for c in cells if c["tokens"] == length})
    return "/".join(str(n) for n in ns)


def average_table(result: dict) -> str:
    """qa1-qa5 average per method (rows) and length (columns): EM@facts / EM@budget."""
    cells = _cells(result, "babilong")
    tasks, lengths = _grid(cells)
    em_f = averages(result, "babilong", lambda r: r["em@facts"])
    em_b = averages(result, "babilong", lambda r: r["em@budget"])
    head = "| method | " + " | ".join(_tokens(t) for t in lengths) + " |"
    lines = [
        head,
        "|---|" + "---:|" * len(lengths),
        "| *samples per task* | " + " | ".join(_samples(cells, t) for t in lengths) + " |",
    ]
    for name in em_f:
        lines.append(
            f"| {name} | "
            + " | ".join(
                f"{em_f[name][t]:.3f} / {em_b[name][t]:.3f}" if t in em_f[name] else ""
                for t in lengths
            )
            + " |"
        )
    return (
        f"{', '.join(tasks)} average, fact EM at the number of facts / at {result['steps']} picks\n\n"
        + "\n".join(lines)
    )


def _method_rows(result: dict, cells: list[dict], cell_text: Callable[[dict], str]) -> list[str]:
    """One Markdown row per task and method, one column per length."""
    tasks, lengths = _grid(cells)
    by = {(c["task"], c["tokens"]): c for c in cells}
    lines = []
    for task in tasks:
        for name in result["methods"]:
            row = []
            for t in lengths:
                m = by.get((task, t), {}).get("methods", {}).get(name)
                row.append(cell_text(m) if m else "")
            lines.append(f"| {task} | {name} | " + " | ".join(row) + " |")
    return lines


def task_table(result: dict) -> str:
    """Every task and method (rows) by length (columns): EM@facts / EM@budget."""
    cells = _cells(result, "babilong")
    _, lengths = _grid(cells)
    lines = [
        "| task | method | " + " | ".join(_tokens(t) for t in lengths) + " |",
        "|---|---|" + "---:|" * len(lengths),
    ]
    lines += _method_rows(result, cells, lambda m: f"{m['em@facts']:.2f} / {m['em@budget']:.2f}")
    return "\n".join(lines)


def stop_table(result: dict) -> str:
    """For methods with a stop rule: average EM, recall and mean steps over the tasks, per
    stop_threshold and length."""
    cells = _cells(result, "babilong")
    tasks, lengths = _grid(cells)
    lines = [
        "| method | stop_threshold | tokens | EM | recall | mean steps | facts per question |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in result["methods"]:
        for i, threshold in enumerate(result["stop_thresholds"]):
            for t in lengths:
                rows = [
                    c["methods"][name].get("stop")
                    for c in cells
                    if c["tokens"] == t and name in c["methods"]
                ]
                if not rows or None in rows:
                    continue
                rows = [r[i] for r in rows]
                facts = statistics.mean(c["facts"] for c in cells if c["tokens"] == t)
                lines.append(
                    f"| {name} | {threshold:g} | {_tokens(t)} | {statistics.mean(r['em'] for r in rows):.3f} | "
                    f"{statistics.mean(r['recall'] for r in rows):.3f} | "
                    f"{statistics.mean(r['mean_steps'] for r in rows):.2f} | {facts:.2f} |"
                )
    return (
        f"with stop_threshold (at most {result['steps']} picks), {', '.join(tasks)} average\n\n"
        + "\n".join(lines)
    )


def ruler_table(result: dict) -> str:
    """RULER variants and methods (rows) by length: needle recall at the number of needles / at
    the step budget."""
    cells = _cells(result, "ruler")
    _, lengths = _grid(cells)
    lines = [
        "| variant | method | " + " | ".join(_tokens(t) for t in lengths) + " |",
        "|---|---|" + "---:|" * len(lengths),
        "| *samples* | | " + " | ".join(_samples(cells, t) for t in lengths) + " |",
    ]
    lines += _method_rows(
        result, cells, lambda m: f"{m['recall@facts']:.2f} / {m['recall@budget']:.2f}"
    )
    return (
        f"needle recall with as many picks as needles / with {result['steps']} picks\n\n"
        + "\n".join(lines)
    )


def timing_table(result: dict) -> str:
    """Seconds per method and length, summed over the cells of both suites, and per sample; the
    one-off pool embedding of each model apart."""
    lengths = sorted({c["tokens"] for c in result["cells"]})
    lines = [
        "| method | pool embedding (once) | " + " | ".join(_tokens(t) for t in lengths) + " |",
        "|---|---:|" + "---:|" * len(lengths),
    ]
    for name in result["methods"]:
        pool = result["pool_embedding"].get(name)
        row = []
        for t in lengths:
            cells = [c for c in result["cells"] if c["tokens"] == t and name in c["methods"]]
            secs, n = sum(c["methods"][name]["seconds"] for c in cells), sum(c["n"] for c in cells)
            row.append(f"{secs:.0f} s ({secs / n:.2f} s/sample)")
        pooled = (
            f"{pool['seconds']:.0f} s{' (cached)' if pool['cache_hit'] else ''}" if pool else ""
        )
        lines.append(f"| {name} | {pooled} | " + " | ".join(row) + " |")
    return (
        "wall time per method and length (all cells of that length), "
        f"{result['machine']['threads']} torch thread(s)\n\n" + "\n".join(lines)
    )


def pooled_samples(cells: list[dict], method: str, metric: str) -> list[float]:
    """``method``'s per-story ``metric`` over ``cells`` (e.g. every task at one length), in order."""
    return [x for c in cells for x in c["methods"][method]["per_sample"][metric]]


def paired_table(result: dict, baseline: str = "dense") -> str:
    """Each method minus ``baseline`` on the same stories, qa1-qa5 pooled per length: mean
    difference of EM@facts / EM@budget and its bootstrap 95% interval (results that carry
    ``per_sample``)."""
    from qrag_training.paired import paired_bootstrap

    cells = [c for c in _cells(result, "babilong") if baseline in c["methods"]]
    tasks, lengths = _grid(cells)
    lines = [
        f"| method - {baseline} | "
        + " | ".join(f"{_tokens(t)} EM@facts / EM@budget" for t in lengths)
        + " |",
        "|---|" + "---:|" * len(lengths),
    ]
    for name in result["methods"]:
        if name == baseline:
            continue
        row = []
        for length in lengths:
            here = [c for c in cells if c["tokens"] == length and name in c["methods"]]
            if len(here) != len(tasks) or "per_sample" not in here[0]["methods"][name]:
                row.append("-")
                continue
            diffs = []
            for metric in ("em@facts", "em@budget"):
                d = paired_bootstrap(
                    pooled_samples(here, name, metric), pooled_samples(here, baseline, metric)
                )
                diffs.append(f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
            row.append(" / ".join(diffs))
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def report(result: dict) -> str:
    """Every table of a result, in Markdown."""
    m = result["machine"]
    parts = [
        (
            f"BabiLong-style benchmark, split {result['split']} (seed {result['seed']}), mode {result['mode']}; "
            f"{m['threads']} torch thread(s), {m['cpu_count']} CPUs; noise pool {result['pool']['sentences']} sentences"
        )
    ]
    if _cells(result, "babilong"):
        parts += [average_table(result), task_table(result), stop_table(result)]
        if "dense" in result["methods"]:
            parts.append(paired_table(result))
    if _cells(result, "ruler"):
        parts.append(ruler_table(result))
    parts.append(timing_table(result))
    return "\n\n".join(parts) + "\n"


def merge(results: list[dict]) -> dict:
    """One result from runs of the same split, seed, step budget and methods: cells of a later
    run replace those of an earlier one with the same suite, task and length (e.g. a separate
    run with more samples at 1M tokens).

    Raises:
        ValueError: the runs do not compare (another seed, step budget or method set).
    """
    first = results[0]
    key = ("seed", "steps", "methods", "stop_thresholds")
    for other in results[1:]:
        if any(other[k] != first[k] for k in key):
            raise ValueError(
                f"cannot merge runs that differ in {[k for k in key if other[k] != first[k]]}"
            )
    cells: dict[tuple, dict] = {}
    for r in results:
        cells.update({(c["suite"], c["task"], c["tokens"]): c for c in r["cells"]})
    merged = dict(first, cells=list(cells.values()), commands=[r["command"] for r in results])
    merged["seconds"] = sum(r.get("seconds", 0) for r in results)
    return merged


def plot(result: dict, path: Path) -> None:
    """Fact EM vs context length (log x), one line per method: at the number of facts, at the
    step budget, and RULER needle recall."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    if _cells(result, "babilong"):
        panels += [
            ("babilong", "em@facts", "qa1-qa5: fact EM, k = number of facts"),
            ("babilong", "em@budget", f"qa1-qa5: fact EM, k = {result['steps']}"),
        ]
    if _cells(result, "ruler"):
        panels.append(
            ("ruler", "recall@budget", f"RULER NIAH: needle recall, k = {result['steps']}")
        )
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (suite, metric, title) in zip(axes[0], panels):
        for name, series in averages(result, suite, lambda r, metric=metric: r[metric]).items():
            xs = sorted(series)
            ax.plot(xs, [series[x] for x in xs], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("context length (tokens)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean over tasks")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(
        f"split {result['split']}, MiniLM-based retrievers, {result['machine']['threads']} CPU thread(s)"
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "results",
        type=Path,
        nargs="+",
        help="babilong/run.py JSONs of one split; cells of later ones replace earlier ones (see merge)",
    )
    p.add_argument("--plot", type=Path, help="also draw the length plot here")
    args = p.parse_args()
    result = merge([json.loads(r.read_text(encoding="utf-8")) for r in args.results])
    print(report(result))
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
