"""Markdown tables of ``general/run.py`` results: one row per method, one column per cell and
metric, the paired difference to dense top-k beside each value (``*`` = better beyond the 95%
interval, ``!`` = worse beyond it); and their plot (``--plot``): each method's value per cell and
metric, and its paired difference to dense top-k with the 95% interval.

    python -m benchmarks.general.report benchmarks/general/results/packaged_val.json [more.json ...]

Methods of several files are listed together when the files share split, seed and cells (the
baselines are then taken from the first file).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from qrag_training.plot import save_figure

MARK = {"better": "*", "worse": "!", "tie": ""}


def table(results: Sequence[dict]) -> str:
    """The markdown table of one or more results over the same cells."""
    first = results[0]
    for other in results[1:]:
        if (other["split"], other["seed"], [c["cell"] for c in other["cells"]]) != (
            first["split"],
            first["seed"],
            [c["cell"] for c in first["cells"]],
        ):
            raise ValueError("results to merge must share split, seed and cells")
    columns = [
        (c["cell"], m, c["n"]) for c in first["cells"] for m in next(iter(c["metrics"].values()))
    ]
    methods: list[tuple[str, dict]] = []
    seen: set[str] = set()
    for result in results:
        for method in result["cells"][0]["metrics"]:
            if method not in seen:
                seen.add(method)
                methods.append((method, result))
    head = (
        "| method | " + " | ".join(f"{cell} {metric} (n={n})" for cell, metric, n in columns) + " |"
    )
    rows = [head, "|---|" + "---:|" * len(columns)]
    for method, result in methods:
        cells = {c["cell"]: c for c in result["cells"]}
        values = []
        for cell, metric, _ in columns:
            c = cells[cell]
            value = c["metrics"][method][metric]
            p = c["paired_vs_dense"].get(method, {}).get(metric)
            values.append(
                f"{value:.3f}"
                if p is None
                else f"{value:.3f} ({p['diff']:+.3f}{MARK[p['verdict']]})"
            )
        rows.append(f"| {method} | " + " | ".join(values) + " |")
    return "\n".join(rows)


def plot(result: dict, path: Path) -> Path:
    """Two panels over the rows "cell metric (n)": left, every method's value; right, each
    method's paired difference to dense top-k with its 95% interval (a bar wholly left of 0 is a
    loss to dense beyond the interval). Returns the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(c, metric) for c in result["cells"] for metric in next(iter(c["metrics"].values()))]
    methods = list(result["cells"][0]["metrics"])
    compared = result["cells"][0]["paired_vs_dense"]  # every method but dense itself
    height = 0.8 / len(methods)
    fig, (values, diffs) = plt.subplots(
        1, 2, figsize=(13, 1.2 + 0.45 * len(rows) * max(1, len(methods) / 3)), sharey=True
    )
    for j, method in enumerate(methods):
        offset = ((len(methods) - 1) / 2 - j) * height  # the first method on top
        ys = [len(rows) - 1 - i + offset for i in range(len(rows))]
        color = f"C{j}"
        values.barh(
            ys, [c["metrics"][method][m] for c, m in rows], height=height, color=color, label=method
        )
        if method not in compared:
            continue
        paired = [c["paired_vs_dense"][method][m] for c, m in rows]
        diffs.errorbar(
            [p["diff"] for p in paired],
            ys,
            xerr=[[p["diff"] - p["low"] for p in paired], [p["high"] - p["diff"] for p in paired]],
            fmt="o",
            markersize=4,
            capsize=2,
            color=color,
        )
    labels = [f"{c['cell']} {m} (n={c['n']})" for c, m in rows]
    values.set_yticks(range(len(rows)), labels[::-1])
    values.set_xlim(0, 1)
    values.set_xlabel("value")
    diffs.axvline(0, color="black", linewidth=0.8)
    diffs.set_xlabel("paired difference to dense top-k (95% interval)")
    for ax in (values, diffs):
        ax.grid(axis="x", alpha=0.3)
    machine = result.get("machine", {})
    fig.suptitle(
        f"split {result['split']}, seed {result['seed']}, "
        f"{machine.get('threads', '?')} CPU thread(s) of {machine.get('cpu_count', '?')}"
    )
    fig.legend(loc="lower center", ncol=len(methods), fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save_figure(fig, path, dpi=110)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+", type=Path)
    p.add_argument("--plot", type=Path, help="also draw the first file's results here (PNG)")
    args = p.parse_args(argv)
    results = [json.loads(path.read_text(encoding="utf-8")) for path in args.results]
    print(table(results))
    if args.plot:
        plot(results[0], args.plot)


if __name__ == "__main__":
    main()
