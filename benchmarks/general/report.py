"""Markdown tables of ``general/run.py`` results: one row per method, one column per cell and
metric, the paired difference to dense top-k beside each value (``*`` = better beyond the 95%
interval, ``!`` = worse beyond it).

    python -m benchmarks.general.report benchmarks/general/results/packaged_val.json [more.json ...]

Methods of several files are listed together when the files share split, seed and cells (the
baselines are then taken from the first file).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

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


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+", type=Path)
    args = p.parse_args(argv)
    print(table([json.loads(path.read_text(encoding="utf-8")) for path in args.results]))


if __name__ == "__main__":
    main()
