"""The benchmark sections of a checkpoint's model card, from ``general/run.py`` results.

``python -m qrag_training.export RUN_DIR OUT_DIR`` writes a card from the run's own record and
reads no benchmark; what the benchmarks measured afterwards reaches the card through its
``--notes NOTES.md``, and this module writes that Markdown (every number read from the JSON
results, none typed by hand):

    # "Where it loses to dense top-k": one model's paired comparisons with dense top-k
    python -m benchmarks.general.card limits benchmarks/general/results/packaged_val.json demo \\
        --out notes.md
    # "Against the default model": paired per question with another model of the same run
    python -m benchmarks.general.card limits RESULT narrow --against default [--also RESULT ...]
    # the validation that chose a run, its held-out report, and the bAbI tasks below dense top-k
    python -m benchmarks.general.card tables --val VAL.json --val-name default \\
        --test TEST.json --test-name default [--legend TEXT] --out notes.md
    python -m qrag_training.export RUN_DIR OUT_DIR --notes notes.md

Without ``--out`` the Markdown goes to standard output (several runs' outputs concatenate into one
notes file). ``limits --card README.md`` instead replaces that section of an existing card in place
(appended where the card has none), leaving the rest of it alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from qrag_training.paired import paired_bootstrap

from benchmarks.general.report import table
from qrag_integrations.core.atomic import write_text_atomic

HEADING = "## Where it loses to dense top-k"
HEADING_AGAINST = "## Against the default model"
HEADING_VAL = "## Validation (chose this run; `benchmarks/general/run.py --split val`)"
HEADING_TEST = "## Held-out report (run once; `benchmarks/general/run.py --split test`)"
#: What the tables' marks mean (``--legend`` names the methods first).
LEGEND = (
    "`untrained` = the packaged MiniLM multi-step; `*` better / `!` worse than dense top-k beyond"
    " the paired 95% interval"
)


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


def tables(paths: Sequence[Path], names: str, legend: str = LEGEND) -> str:
    """The legend, then one ``report.table`` per result file, showing the methods ``names``
    (comma-separated) and ``untrained`` beside the baselines (dense top-k, BM25, their fusion)."""
    keep = {"untrained", *names.split(",")}
    out = []
    for path in paths:
        result = json.loads(path.read_text(encoding="utf-8"))
        for cell in result["cells"]:
            for method in [m for m in cell["metrics"] if m not in keep and m in result["models"]]:
                del cell["metrics"][method]
                cell["paired_vs_dense"].pop(method, None)
        out.append(
            f"`{path.name}` ({result['split']} split, seed {result['seed']}, "
            f"{result['machine']['threads']} CPU threads):\n\n" + table([result])
        )
    return legend + ".\n\n" + "\n\n".join(out)


def losses(paths: Sequence[Path], names: str) -> list[str]:
    """Every bAbI task, cell and metric where one of ``names`` has a lower mean than dense top-k,
    with the paired interval where the file has per-task intervals (and the method's name when
    ``names`` holds several)."""
    out = []
    several = len(names.split(",")) > 1
    for path in paths:
        result = json.loads(path.read_text(encoding="utf-8"))
        for cell in result["cells"]:
            n = cell["n"] // max(1, len(cell["by_task"]))
            for task, methods in cell["by_task"].items():
                for name in [m for m in names.split(",") if m in methods]:
                    for metric, value in methods[name].items():
                        dense = methods["dense"][metric]
                        if value >= dense:
                            continue
                        paired = cell.get("by_task_paired_vs_dense", {}).get(task, {})
                        p = paired.get(name, {}).get(metric)
                        interval = (
                            f", paired {p['diff']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}] {p['verdict']}"
                            if p
                            else ""
                        )
                        who = f" (`{name}`)" if several else ""
                        out.append(
                            f"- `{path.name}`, {cell['cell']}, {task}, {metric}{who}: {value:.3f} vs "
                            f"dense {dense:.3f} ({n} stories{interval})"
                        )
    return out


def results_notes(
    val: Sequence[Path],
    val_name: str,
    test: Sequence[Path] = (),
    test_name: str = "default",
    shipped_val_name: str | None = None,
    legend: str = LEGEND,
) -> str:
    """The validation tables that chose a run, its held-out report once it exists, and the bAbI
    tasks where the shipped method (``shipped_val_name`` in the validation files, default the
    first of ``val_name``; ``test_name`` in the held-out ones) is below dense top-k."""
    notes = ""
    if val:
        notes += f"{HEADING_VAL}\n\n" + tables(val, val_name, legend) + "\n\n"
    if test:
        notes += f"{HEADING_TEST}\n\n" + tables(test, test_name, legend) + "\n\n"
    shipped = shipped_val_name or val_name.split(",")[0]
    below = losses(val, shipped) + losses(test, test_name)
    notes += f"{HEADING}\n\n" + (
        "bAbI tasks whose mean is below dense top-k's on the same stories (with the paired 95%\n"
        "interval where the result file keeps per-question scores):\n\n" + "\n".join(below)
        if below
        else "No bAbI task has a mean below dense top-k's in these files."
    )
    return notes + "\n"


def _read(path: Path) -> tuple[dict, str]:
    """A result and its path as cards name it (from ``benchmarks/`` where it lies below it)."""
    posix = path.resolve().as_posix()
    source = "benchmarks/" + posix.split("/benchmarks/", 1)[1] if "/benchmarks/" in posix else posix
    return json.loads(path.read_text(encoding="utf-8")), source


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
    else:
        write_text_atomic(out, text)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.general.card",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    lim = sub.add_parser("limits", help="one model's paired comparisons (dense or --against)")
    lim.add_argument("result", type=Path, help="a general/run.py JSON")
    lim.add_argument("model", help="the model's name in that JSON")
    lim.add_argument(
        "--against", metavar="OTHER", help="the section against this model of the run instead"
    )
    lim.add_argument(
        "--also",
        type=Path,
        action="append",
        default=[],
        metavar="RESULT",
        help="with --against: a further general/run.py JSON of both models whose cells the first "
        "lacks (repeatable; the first file's cells win)",
    )
    where = lim.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=None, help="the notes file to write")
    where.add_argument(
        "--card", type=Path, default=None, help="a README.md whose section is replaced in place"
    )
    tab = sub.add_parser("tables", help="validation / held-out tables and bAbI tasks below dense")
    tab.add_argument("--val", type=Path, action="append", default=[], metavar="RESULT")
    tab.add_argument("--val-name", default="default", help="methods shown, comma-separated")
    tab.add_argument("--test", type=Path, action="append", default=[], metavar="RESULT")
    tab.add_argument("--test-name", default="default", help="methods shown, comma-separated")
    tab.add_argument(
        "--shipped-val-name",
        default=None,
        help="the method of the validation files that is the checkpoint as shipped "
        "(default: the first of --val-name)",
    )
    tab.add_argument(
        "--legend", default=LEGEND, help="what the method names and marks of the tables mean"
    )
    tab.add_argument("--out", type=Path, default=None, help="the notes file to write")
    args = p.parse_args(argv)

    if args.command == "tables":
        missing = [str(path) for path in [*args.val, *args.test] if not path.is_file()]
        if missing:
            p.error("no such result: " + ", ".join(missing))
        text = results_notes(
            args.val, args.val_name, args.test, args.test_name, args.shipped_val_name, args.legend
        )
        _emit(text, args.out)
        return
    result, source = _read(args.result)
    if args.also and not args.against:
        p.error("--also needs --against")
    if args.against:
        also = [_read(path) for path in args.also]
        new = against_section(result, args.model, args.against, source, also)
        heading = HEADING_AGAINST
    else:
        new, heading = section(result, args.model, source), HEADING
    if args.card is None:
        _emit(new, args.out)
    else:
        card = args.card.read_text(encoding="utf-8")
        write_text_atomic(args.card, replace_section(card, new, heading))


if __name__ == "__main__":
    main()
