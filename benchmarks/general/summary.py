"""One table of the default model's held-out results across benchmarks, read from their result
files (no number typed by hand): the README's summary.

    python -m benchmarks.general.summary                      # the shipped default's sources below
    python -m benchmarks.general.summary --method untrained   # another method of the same runs

Each row is one cell of one result file (``general/run.py``, ``babilong/run.py`` or
``hotpotqa/run.py``): the default and the baselines run beside it, and, per metric, the default's
paired difference to the best baseline a user already runs (the highest of dense top-k, BM25 and
dense+BM25 that the file holds) with its bootstrap 95% interval, where the file keeps per-question
scores (``*`` better, ``!`` worse beyond it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from qrag_training.paired import PairedDifference, paired_bootstrap

from benchmarks.babilong.report import pooled_samples
from benchmarks.general.report import MARK
from benchmarks.harness.results import command_words, flag_value

#: ``benchmarks/``: result paths below are relative to it.
BENCHMARKS = Path(__file__).resolve().parents[1]

#: What users already run: the method is paired with the best of these on each metric.
USER_BASELINES = ("dense", "bm25", "dense+bm25")
#: Baselines shown beside the method, in this order (a file without one shows "-").
BASELINES = (*USER_BASELINES, "untrained")


@dataclass(frozen=True)
class Source:
    """One row: a cell of a result file."""

    label: str
    """What the row measured, as the table shows it."""
    path: str
    """The result file, relative to ``benchmarks/``."""
    kind: str
    """Its benchmark: ``general``, ``babilong`` or ``hotpotqa``."""
    cell: str
    """general: the cell name; babilong: the length in tokens; hotpotqa: the setting."""
    metrics: tuple[str, str]
    """The two metrics shown (babilong: ``em@facts`` and ``em@budget``, printed as em@6)."""
    method: str = "default"
    """The name the file gives the shipped default."""


#: The default as it ships (this table since 2026-12-06, code fd8f3b1; the pooled HotpotQA row from
#: 2026-12-02 and the 10M row from 2026-11-28, both with BM25 fused by rank): held-out runs only, each
#: once after every choice, and SQuAD validation (its test articles are reserved).
SOURCES: tuple[Source, ...] = (
    Source(
        "HotpotQA bucket 0, 10 paragraphs each: EM@2 / EM@4",
        "general/results/general_test_20261151.json",
        "general",
        "hotpotqa",
        ("em@2", "em@4"),
    ),
    Source(
        "HotpotQA bucket 0, all 14,616 paragraphs in one index (BM25 fused by rank, code of 2026-12-02): EM@2 / EM@4",
        "hotpotqa/results/hotpotqa_eval_pooled_general.json",
        "hotpotqa",
        "pooled",
        ("em@2", "em@4"),
        method="general",
    ),
    Source(
        "SQuAD v2 dev articles 0-17, 573 pooled paragraphs (out of domain): hit@1 / hit@3",
        "general/results/single_hop_val_555574.json",
        "general",
        "squad",
        ("hit@1", "hit@3"),
    ),
    Source(
        "Package READMEs, 1,676 pooled paragraphs, the validation packages: hit@1 / hit@3",
        "general/results/single_hop_val_555574.json",
        "general",
        "techdocs",
        ("hit@1", "hit@3"),
    ),
    Source(
        "Package READMEs, 1,676 pooled paragraphs, the test packages: hit@1 / hit@3",
        "general/results/techdocs_test_20261151.json",
        "general",
        "techdocs",
        ("hit@1", "hit@3"),
    ),
    Source(
        "bAbI qa1-qa5, 4K tokens, training noise: em@facts / em@6",
        "general/results/general_test_20261151.json",
        "general",
        "babilong-mixed-4000",
        ("em@facts", "em@6"),
    ),
    Source(
        "bAbI qa1-qa5, 4K tokens, essays noise: em@facts / em@6",
        "general/results/general_test_20261151.json",
        "general",
        "babilong-essays-4000",
        ("em@facts", "em@6"),
    ),
    Source(
        "bAbI qa1-qa5, 32K tokens, essays noise: em@facts / em@6",
        "general/results/general_test_20261151.json",
        "general",
        "babilong-essays-32000",
        ("em@facts", "em@6"),
    ),
    Source(
        "bAbI qa1-qa5, 4K tokens, Wikipedia noise: em@facts / em@6",
        "babilong/results/babilong_test_wiki_20261152.json",
        "babilong",
        "4000",
        ("em@facts", "em@budget"),
    ),
    Source(
        "bAbI qa1-qa5, 1M tokens, Wikipedia noise: em@facts / em@6",
        "babilong/results/babilong_test_wiki_20261152.json",
        "babilong",
        "1000000",
        ("em@facts", "em@budget"),
    ),
    Source(
        "bAbI qa1-qa5, 128K tokens, training noise: em@facts / em@6",
        "babilong/results/babilong_test_1m_20261153.json",
        "babilong",
        "128000",
        ("em@facts", "em@budget"),
    ),
    Source(
        "bAbI qa1-qa5, 1M tokens, training noise: em@facts / em@6",
        "babilong/results/babilong_test_1m_20261153.json",
        "babilong",
        "1000000",
        ("em@facts", "em@budget"),
    ),
    Source(
        "bAbI qa1-qa5, 10M tokens, training noise (BM25 fused by rank, code of 2026-11-28): em@facts / em@6",
        "babilong/results/babilong_test_10m_20261144.json",
        "babilong",
        "10000000",
        ("em@facts", "em@budget"),
    ),
    Source(
        "RULER multi-key, 4K tokens: recall with as many picks as needles / 5 picks",
        "general/results/general_test_20261151.json",
        "general",
        "ruler-multikey-4000",
        ("em@facts", "em@5"),
    ),
)


class MissingMethod(ValueError):
    """A result file holds the cell but not the method asked for."""


@dataclass(frozen=True)
class Row:
    """One cell's numbers: ``values[method] = (first metric, second metric)``."""

    source: Source
    split: str
    n: int
    values: dict[str, tuple[float, float]]
    samples: dict[str, tuple[list[float], list[float]]] | None
    """Per method its per-question scores of the two metrics, or ``None`` (a file without them)."""

    def versus_best(self, method: str) -> tuple[tuple[str, PairedDifference], ...] | None:
        """Per metric the best user baseline (highest mean) and ``method`` minus it, paired; or
        ``None`` without per-question scores."""
        if self.samples is None or method not in self.samples:
            return None
        held = [b for b in USER_BASELINES if b != method and b in self.samples]
        if not held:
            return None
        out = []
        for i in range(2):
            best = max(held, key=lambda b: self.values[b][i])
            out.append((best, paired_bootstrap(self.samples[method][i], self.samples[best][i])))
        return tuple(out)


def _general_row(source: Source, result: dict) -> Row:
    cells = {c["cell"]: c for c in result["cells"]}
    if source.cell not in cells:
        raise ValueError(f"{source.path}: no cell {source.cell!r} (it has {sorted(cells)})")
    cell = cells[source.cell]
    values = {m: tuple(v[k] for k in source.metrics) for m, v in cell["metrics"].items()}
    per_question = cell.get("per_question")
    samples = None
    if per_question:
        samples = {m: tuple(v[k] for k in source.metrics) for m, v in per_question.items()}
    return Row(source, f"{result['split']} {result['seed']}", int(cell["n"]), values, samples)  # type: ignore[arg-type]


def _babilong_split(result: dict) -> str:
    """``babilong/run.py`` names a result's split ``seed<N>`` when a seed was given: the split
    asked for is in its command."""
    words = command_words(result["command"])
    asked = flag_value(words, "--split") or result["split"]
    return f"{asked} {result['seed']}"


def _babilong_row(source: Source, result: dict) -> Row:
    tokens = int(source.cell)
    cells = [c for c in result["cells"] if c["suite"] == "babilong" and c["tokens"] == tokens]
    if not cells:
        raise ValueError(f"{source.path}: no bAbI cell at {tokens} tokens")
    methods = [m for m in result["methods"] if all(m in c["methods"] for c in cells)]
    scores = {m: tuple(pooled_samples(cells, m, k) for k in source.metrics) for m in methods}
    values = {m: tuple(sum(x) / len(x) for x in per) for m, per in scores.items()}
    n = sum(c["n"] for c in cells)
    return Row(source, _babilong_split(result), n, values, scores)  # type: ignore[arg-type]


def _hotpotqa_row(source: Source, result: dict) -> Row:
    setting = result["settings"][source.cell]
    values = {m: tuple(v[k] for k in source.metrics) for m, v in setting["methods"].items()}
    split = "test (bucket 0)" if result["split"] == "eval" else result["split"]
    return Row(source, split, int(setting["questions"]), values, None)  # type: ignore[arg-type]


READERS = {"general": _general_row, "babilong": _babilong_row, "hotpotqa": _hotpotqa_row}


def row_of(source: Source, root: Path | None = None) -> Row:
    """Read one source's cell from its result file.

    Args:
        source: the row to read.
        root: the folder ``source.path`` is relative to (default: ``benchmarks/``).

    Raises:
        MissingMethod: the file holds the cell but not ``source.method``.
        ValueError: an unknown kind, or the file lacks the cell.
    """
    if source.kind not in READERS:
        raise ValueError(f"unknown result kind {source.kind!r}; known: {sorted(READERS)}")
    result = json.loads(((BENCHMARKS if root is None else root) / source.path).read_text())
    row = READERS[source.kind](source, result)
    if source.method not in row.values:
        raise MissingMethod(f"{source.path}: no method {source.method!r} in {source.cell!r}")
    return row


def _pair(values: tuple[float, float] | None) -> str:
    return "-" if values is None else f"{values[0]:.3f} / {values[1]:.3f}"


def _difference(best: str, d: PairedDifference) -> str:
    return f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}]{MARK[d.verdict]} ({best})"


def table(rows: Sequence[Row], method: str = "default") -> str:
    """The Markdown table: one row per cell, each source's method (headed ``method``) beside the
    baselines."""
    baselines = [b for b in BASELINES if b != method]
    head = (
        f"| cell (file) | split, seed | n | {method} | "
        + " | ".join(baselines)
        + f" | {method} - best of {', '.join(USER_BASELINES)}, paired |"
    )
    lines = [head, "|---|---|---:|---:|" + "---:|" * len(baselines) + "---|"]
    for r in rows:
        paired = r.versus_best(r.source.method)
        diff = "-" if paired is None else " / ".join(_difference(b, d) for b, d in paired)
        lines.append(
            f"| {r.source.label} (`{r.source.path}`) | {r.split} | {r.n} | "
            f"**{_pair(r.values[r.source.method])}** | "
            + " | ".join(_pair(r.values.get(b)) for b in baselines)
            + f" | {diff} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--method", default=None, help="the method to show (default: each source's default)"
    )
    args = parser.parse_args(argv)
    sources = [s if args.method is None else replace(s, method=args.method) for s in SOURCES]
    rows, skipped = [], []
    for source in sources:
        try:
            rows.append(row_of(source))
        except MissingMethod:
            skipped.append(f"{source.path}:{source.cell}")
    print(table(rows, args.method or "default"))
    if skipped:
        print(f"\nnot run with {args.method}: " + ", ".join(skipped))


if __name__ == "__main__":
    main()
