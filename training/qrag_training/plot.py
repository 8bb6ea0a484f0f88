"""Draw the training curves of a run: ``python -m qrag_training.plot runs/x/metrics.jsonl``.

Top panel: mean training episode reward and the share of solved episodes (PQN), or the loss and
next-hop accuracy (``algo=next_hop``); bottom panel: fact EM / F1 and reward on the evaluation
episodes (``env.eval``: the validation slice where the env has one) at every evaluation. Writes a PNG next to the metrics file
(or to ``--out``).
"""

from __future__ import annotations

import argparse
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrag_integrations.core.atomic import write_bytes_atomic


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The run's records of a ``metrics.jsonl`` file (:func:`qrag_training.run_folder.read_metrics`:
    rows a resumed run logged again replace a killed process's)."""
    from qrag_training.run_folder import read_metrics as run_history  # (it imports torch)

    return run_history(path)


def _series(
    records: Sequence[dict[str, Any]], key: str, x_key: str = "step"
) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in records:
        value = r.get(key)
        x = r.get(x_key, 0.0 if r["step"] == 0 else None)  # the update-0 evaluation has no time
        if isinstance(value, (int, float)) and math.isfinite(value) and x is not None:
            xs.append(x)
            ys.append(float(value))
    return xs, ys


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Write a matplotlib figure as a PNG atomically (an interrupted run leaves the old picture,
    never a truncated one) and close it; returns the path."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
    return Path(path)


def plot_metrics(
    metrics: str | Path, out: str | Path | None = None, title: str | None = None
) -> Path:
    """Plot a run's ``metrics.jsonl`` to a PNG; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = Path(metrics)
    records = read_metrics(metrics)
    out = Path(out) if out else metrics.with_suffix(".png")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for key, label in (
        ("reward", "train episode reward"),
        ("success", "train solved share"),
        ("loss", "train loss (TD for PQN, cross-entropy for next hop)"),
        ("hop_accuracy", "train next-hop accuracy"),
    ):
        xs, ys = _series(records, key)
        if xs:
            top.plot(xs, ys, label=label)
    top.set_ylabel("training")
    top.legend(loc="lower right")
    top.grid(alpha=0.3)
    for key, label in (
        ("eval/fact_em", "eval fact EM"),
        ("eval/fact_f1", "eval fact F1"),
        ("eval/reward", "eval reward"),
    ):
        xs, ys = _series(records, key)
        if xs:
            bottom.plot(xs, ys, marker="o", label=label)
    bottom.set_xlabel("optimiser step")
    bottom.set_ylabel("evaluation episodes")
    bottom.legend(loc="lower right")
    bottom.grid(alpha=0.3)
    fig.suptitle(title or metrics.parent.name)
    fig.tight_layout()
    return save_figure(fig, out)


def compare_runs(
    runs: dict[str, str | Path],
    out: str | Path,
    key: str = "eval/fact_em",
    title: str | None = None,
) -> Path:
    """Plot one evaluation metric of several runs side by side, against the optimiser step (left)
    and the training wall-clock minutes (right); returns the PNG path.

    Args:
        runs: label -> ``metrics.jsonl`` path (or run folder).
        out: PNG path.
        key: the metric (default the evaluation fact EM).
        title: figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for label, path in runs.items():
        path = Path(path)
        records = read_metrics(path / "metrics.jsonl" if path.is_dir() else path)
        xs, ys = _series(records, key)
        by_step.plot(xs, ys, marker="o", markersize=3, label=label)
        ts, ys = _series(records, key, x_key="seconds")
        by_time.plot([t / 60 for t in ts], ys, marker="o", markersize=3, label=label)
    by_step.set_xlabel("optimiser step")
    by_time.set_xlabel("training minutes")
    by_step.set_ylabel(key)
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
    by_time.legend(loc="lower right", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    return save_figure(fig, out)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m qrag_training.plot METRICS [--out PNG] [--title T]``, or
    ``python -m qrag_training.plot --compare LABEL=METRICS ... --out PNG``."""
    p = argparse.ArgumentParser(prog="qrag-plot", description="Plot a Q-RAG run's metrics.jsonl")
    p.add_argument("metrics", nargs="?", help="path to metrics.jsonl (or the run folder)")
    p.add_argument(
        "--compare",
        nargs="+",
        metavar="LABEL=METRICS",
        help="several runs' evaluation metric in one figure (needs --out)",
    )
    p.add_argument("--key", default="eval/fact_em", help="metric compared with --compare")
    p.add_argument("--out", help="PNG path (default: next to the metrics file)")
    p.add_argument("--title", help="figure title (default: the run folder name)")
    args = p.parse_args(argv)
    if args.compare:
        if not args.out:
            p.error("--compare needs --out")
        pairs = [item.partition("=") for item in args.compare]
        if any(not sep or not label for label, sep, _ in pairs):
            p.error("--compare takes LABEL=METRICS pairs")
        print(
            compare_runs({label: path for label, _, path in pairs}, args.out, args.key, args.title)
        )
        return
    if not args.metrics:
        p.error("give a metrics file, or --compare")
    metrics = Path(args.metrics)
    if metrics.is_dir():
        metrics = metrics / "metrics.jsonl"
    print(plot_metrics(metrics, args.out, args.title))


if __name__ == "__main__":
    main()
