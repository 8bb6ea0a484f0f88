"""Collect ``qrag-eval`` summaries into one JSON and a Markdown table (no numbers typed by hand).

python -m benchmarks.training_eval.collect runs/eval --out benchmarks/training_eval/results/training_eval_qa2_4k.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: Row order and labels of the table.
LABELS = {
    "qrag-best": "(a) Q-RAG, trained (best checkpoint, update 200)",
    "qrag-last": "(a') Q-RAG, trained (last checkpoint, update 600)",
    "base": "(b) untrained MiniLM as multi-step retriever",
    "dense": "(c) single-step dense top-k, same encoder",
    "bm25": "(d) BM25 top-k",
}


def method_of(folder: Path) -> str:
    """``qa2-4k-qrag-best-k6`` -> ``qrag-best``; ``qa2-4k-bm25-k2`` -> ``bm25``."""
    parts = folder.name.split("-")
    return "-".join(parts[2:-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "folder", type=Path, help="folder holding one sub-folder per qrag-eval --out"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args()
    rows = []
    for summary in sorted(args.folder.glob("*/summary.json")):
        data = json.loads(summary.read_text())
        rows.append(
            {
                "method": method_of(summary.parent),
                **{
                    k: data[k]
                    for k in ("steps", "fact_em", "fact_f1", "mean_steps", "n", "seconds", "data")
                },
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    steps = sorted({r["steps"] for r in rows}, reverse=True)
    print("| retriever | " + " | ".join(f"fact EM / F1, {s} picks" for s in steps) + " |")
    print("|---|" + "---:|" * len(steps))
    for method, label in LABELS.items():
        cells = []
        for s in steps:
            hit = [r for r in rows if r["method"] == method and r["steps"] == s]
            cells.append(f"{hit[0]['fact_em']:.3f} / {hit[0]['fact_f1']:.3f}" if hit else "n/a")
        if any(c != "n/a" for c in cells):
            print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
