"""Draw the training curves of a run: ``python -m qrag_training.plot runs/x/metrics.jsonl``.

Top panel: mean training episode reward and the share of solved episodes (PQN), or the loss and
next-hop accuracy (``algo=next_hop``); bottom panel: fact EM / F1 and reward on the evaluation
episodes (``env.eval``: the validation slice where the env has one) at every evaluation. Writes a PNG next to the metrics file
(or to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl`` file, in file order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _series(records: Sequence[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in records:
        value = r.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            xs.append(r["step"])
            ys.append(float(value))
    return xs, ys


def plot_metrics(metrics: str | Path, out: str | Path | None = None, title: str | None = None) -> Path:
    """Plot a run's ``metrics.jsonl`` to a PNG; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = Path(metrics)
    records = read_metrics(metrics)
    out = Path(out) if out else metrics.with_suffix(".png")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for key, label in (("reward", "train episode reward"), ("success", "train solved share"),
                       ("loss", "train loss (next hop)"), ("hop_accuracy", "train next-hop accuracy")):
        xs, ys = _series(records, key)
        if xs:
            top.plot(xs, ys, label=label)
    top.set_ylabel("training")
    top.legend(loc="lower right")
    top.grid(alpha=0.3)
    for key, label in (("eval/fact_em", "eval fact EM"), ("eval/fact_f1", "eval fact F1"),
                       ("eval/reward", "eval reward")):
        xs, ys = _series(records, key)
        if xs:
            bottom.plot(xs, ys, marker="o", label=label)
    bottom.set_xlabel("optimiser step")
    bottom.set_ylabel("evaluation episodes")
    bottom.legend(loc="lower right")
    bottom.grid(alpha=0.3)
    fig.suptitle(title or metrics.parent.name)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m qrag_training.plot METRICS [--out PNG] [--title T]``."""
    p = argparse.ArgumentParser(prog="qrag-plot", description="Plot a Q-RAG run's metrics.jsonl")
    p.add_argument("metrics", help="path to metrics.jsonl (or the run folder)")
    p.add_argument("--out", help="PNG path (default: next to the metrics file)")
    p.add_argument("--title", help="figure title (default: the run folder name)")
    args = p.parse_args(argv)
    metrics = Path(args.metrics)
    if metrics.is_dir():
        metrics = metrics / "metrics.jsonl"
    print(plot_metrics(metrics, args.out, args.title))


if __name__ == "__main__":
    main()
