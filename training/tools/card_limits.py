"""Write a checkpoint's "where it loses" section into its model card, from a general/run.py result.

A narrow checkpoint must say on its card where it is worse than single-step dense top-k with the
same base encoder. This reads the paired comparisons of one model in a ``general/run.py`` JSON
and writes (or replaces) the card section, every number read from the JSON:

    python training/tools/card_limits.py benchmarks/general/results/packaged_val.json demo \\
        qrag_integrations/assets/demo_checkpoint/README.md

With ``--against OTHER`` it writes the section "Against the default model" instead: the model
paired per question against another model of the same run (the default), from the run's
per-question scores.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from qrag_training.paired import paired_bootstrap

from qrag_integrations.core.atomic import write_text_atomic

HEADING = "## Where it loses to dense top-k"
HEADING_AGAINST = "## Against the default model"


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


def _run_note(result: dict, source: str) -> str:
    return f"{result['split']} split, seed {result['seed']}, `{source}`"


def against_section(
    result: dict, model: str, other: str, source: str, also: Sequence[tuple[dict, str]] = ()
) -> str:
    """The card section for ``model`` paired per question against ``other`` of the same run;
    ``also`` = further ``(result, source)`` runs of both, whose cells the first run lacks."""
    runs = [(result, source), *also]
    for run, name_of in runs:
        for name in (model, other):
            if name not in run["models"]:
                raise KeyError(f"model {name!r} is not in {name_of}")
    cells: list[dict] = []
    notes = []
    for run, name_of in runs:
        seen = {c["cell"] for c in cells}
        new = [c for c in run["cells"] if c["cell"] not in seen]
        cells += new
        if new:
            notes.append(f"{', '.join(c['cell'] for c in new)}: {_run_note(run, name_of)}")
    lines = [
        HEADING_AGAINST,
        "",
        (
            f"Paired on the same questions with `{result['models'][other]}` (`{other}`; "
            f"`benchmarks/general/run.py`, {result['machine']['cpu_count']} CPU cores; "
            f"{'; '.join(notes)}). Difference to it with its bootstrap 95% interval; "
            "**better** / **worse** = beyond the interval."
        ),
        "",
        f"| cell | questions | metric | this checkpoint | `{other}` | difference [95% interval] | verdict |",
        "|---|---:|---|---:|---:|---|---|",
    ]
    wins, losses = [], []
    for cell in cells:
        mine, theirs = cell["per_question"][model], cell["per_question"][other]
        for metric, value in cell["metrics"][model].items():
            p = paired_bootstrap(mine[metric], theirs[metric])
            {"better": wins, "worse": losses, "tie": []}[p.verdict].append(
                f"{cell['cell']} {metric}"
            )
            verdict = p.verdict if p.verdict == "tie" else f"**{p.verdict}**"
            lines.append(
                f"| {cell['cell']} | {cell['n']} | {metric} | {value:.3f} | "
                f"{cell['metrics'][other][metric]:.3f} | {p.diff:+.3f} [{p.low:+.3f}, {p.high:+.3f}] "
                f"| {verdict} |"
            )
    lines += [
        "",
        "Better than it on: " + (", ".join(wins) if wins else "no cell") + ".",
        "Worse than it on: " + (", ".join(losses) if losses else "no cell") + ".",
        "",
    ]
    return "\n".join(lines)


def replace_section(card: str, new: str, heading: str = HEADING) -> str:
    """``card`` with its section under ``heading`` replaced by ``new`` (appended if absent)."""
    start = card.find(heading)
    if start < 0:
        return card.rstrip("\n") + "\n\n" + new
    end = card.find("\n## ", start + len(heading))
    return card[:start] + new + (card[end + 1 :] if end >= 0 else "")


def _read(path: Path) -> tuple[dict, str]:
    """A result and its path as cards name it (from ``benchmarks/`` where it lies below it)."""
    posix = path.resolve().as_posix()
    source = "benchmarks/" + posix.split("/benchmarks/", 1)[1] if "/benchmarks/" in posix else posix
    return json.loads(path.read_text(encoding="utf-8")), source


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("result", type=Path, help="a general/run.py JSON")
    p.add_argument("model", help="the model's name in that JSON")
    p.add_argument("card", type=Path, help="the checkpoint's README.md")
    p.add_argument(
        "--against", metavar="OTHER", help="write the section against this model of the run instead"
    )
    p.add_argument(
        "--also",
        type=Path,
        action="append",
        default=[],
        metavar="RESULT",
        help="with --against: a further general/run.py JSON of both models whose cells the first "
        "lacks (repeatable; the first file's cells win)",
    )
    args = p.parse_args(argv)
    result, source = _read(args.result)
    if args.also and not args.against:
        p.error("--also needs --against")
    if args.against:
        also = [_read(path) for path in args.also]
        new = against_section(result, args.model, args.against, source, also)
        heading = HEADING_AGAINST
    else:
        new, heading = section(result, args.model, source), HEADING
    card = args.card.read_text(encoding="utf-8")
    write_text_atomic(args.card, replace_section(card, new, heading))


if __name__ == "__main__":
    main()
