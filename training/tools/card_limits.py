"""Write a checkpoint's "where it loses" section into its model card, from a general/run.py result.

A narrow checkpoint must say on its card where it is worse than single-step dense top-k with the
same base encoder. This reads the paired comparisons of one model in a ``general/run.py`` JSON
and writes (or replaces) the card section, every number read from the JSON:

    python training/tools/card_limits.py benchmarks/general/results/packaged_val.json demo \\
        qrag_integrations/assets/demo_checkpoint/README.md
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from qrag_integrations.core.atomic import write_text_atomic

HEADING = "## Where it loses to dense top-k"


def section(result: dict, model: str, source: str) -> str:
    """The card section for ``model``: every cell and metric, its paired difference to dense."""
    lines = [
        HEADING,
        "",
        (
            f"Paired on the same questions with single-step dense top-k of the untrained base encoder "
            f"(`benchmarks/general/run.py`, {result['split']} split, seed {result['seed']}, "
            f"{result['machine']['cpu_count']} CPU cores; `{source}`). Difference to dense with its "
            "bootstrap 95% interval; **worse** = dense is better beyond the interval."
        ),
        "",
        "| cell | questions | metric | this checkpoint | dense top-k | difference [95% interval] | verdict |",
        "|---|---:|---|---:|---:|---|---|",
    ]
    worse = []
    for cell in result["cells"]:
        if model not in cell["metrics"]:
            raise KeyError(f"model {model!r} is not in cell {cell['cell']!r} of {source}")
        for metric, value in cell["metrics"][model].items():
            p = cell["paired_vs_dense"][model][metric]
            verdict = f"**{p['verdict']}**" if p["verdict"] == "worse" else p["verdict"]
            if p["verdict"] == "worse":
                worse.append(f"{cell['cell']} {metric}")
            lines.append(
                f"| {cell['cell']} | {cell['n']} | {metric} | {value:.3f} | {cell['metrics']['dense'][metric]:.3f} "
                f"| {p['diff']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}] | {verdict} |"
            )
    lines += [
        "",
        "Worse than dense top-k on: " + (", ".join(worse) if worse else "no cell") + ".",
        "",
    ]
    return "\n".join(lines)


def replace_section(card: str, new: str) -> str:
    """``card`` with its section under :data:`HEADING` replaced by ``new`` (appended if absent)."""
    start = card.find(HEADING)
    if start < 0:
        return card.rstrip("\n") + "\n\n" + new
    end = card.find("\n## ", start + len(HEADING))
    return card[:start] + new + (card[end + 1 :] if end >= 0 else "")


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("result", type=Path, help="a general/run.py JSON")
    p.add_argument("model", help="the model's name in that JSON")
    p.add_argument("card", type=Path, help="the checkpoint's README.md")
    args = p.parse_args(argv)
    result = json.loads(args.result.read_text(encoding="utf-8"))
    source = args.result.as_posix().split("benchmarks/", 1)[-1]
    write_text_atomic(
        args.card,
        replace_section(args.card.read_text(encoding="utf-8"), section(result, args.model, source)),
    )


if __name__ == "__main__":
    main()
