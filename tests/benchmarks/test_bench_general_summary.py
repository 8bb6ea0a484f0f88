"""general/summary.py: one table of the default across result files of three benchmarks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.general import summary


def _write(root: Path, name: str, data: dict) -> str:
    (root / name).write_text(json.dumps(data))
    return name


def _babilong(method: str) -> dict:
    def cell(task: str, ours: list[int], dense: list[int]) -> dict:
        return {
            "suite": "babilong",
            "task": task,
            "tokens": 4000,
            "n": len(ours),
            "methods": {
                method: {"per_sample": {"em@facts": ours, "em@budget": [1] * len(ours)}},
                "dense": {"per_sample": {"em@facts": dense, "em@budget": dense}},
            },
        }

    return {
        "split": "seed7",
        "seed": 7,
        "command": "python -m benchmarks.babilong.run --split test --seed 7",
        "methods": {method: "multi-step", "dense": "dense"},
        "cells": [cell("qa1", [1, 1, 0, 1], [0, 1, 0, 0]), cell("qa2", [1, 0, 1, 1], [0, 0, 0, 0])],
    }


def test_rows_of_each_kind(tmp_path: Path) -> None:
    ones = [1.0] * 10

    def per_question(hit1: int, hit3: int) -> dict[str, list[float]]:
        return {
            "hit@1": ones[:hit1] + [0.0] * (10 - hit1),
            "hit@3": ones[:hit3] + [0.0] * (10 - hit3),
        }

    general = {
        "split": "test",
        "seed": 3,
        "cells": [
            {
                "cell": "squad",
                "n": 10,
                "metrics": {
                    "default": {"hit@1": 0.7, "hit@3": 0.9},
                    "dense": {"hit@1": 0.6, "hit@3": 0.9},
                    "bm25": {"hit@1": 0.3, "hit@3": 0.5},
                    "dense+bm25": {"hit@1": 0.6, "hit@3": 1.0},
                },
                "per_question": {
                    "default": per_question(7, 9),
                    "dense": per_question(6, 9),
                    "bm25": per_question(3, 5),
                    "dense+bm25": per_question(6, 10),
                },
            }
        ],
    }
    hotpot = {
        "split": "eval",
        "settings": {
            "pooled": {"questions": 9, "methods": {"general": {"em@2": 0.5, "em@4": 0.75}}}
        },
    }
    rows = [
        summary.row_of(
            summary.Source(
                "g", _write(tmp_path, "g.json", general), "general", "squad", ("hit@1", "hit@3")
            ),
            tmp_path,
        ),
        summary.row_of(
            summary.Source(
                "b",
                _write(tmp_path, "b.json", _babilong("ours")),
                "babilong",
                "4000",
                ("em@facts", "em@budget"),
                method="ours",
            ),
            tmp_path,
        ),
        summary.row_of(
            summary.Source(
                "h",
                _write(tmp_path, "h.json", hotpot),
                "hotpotqa",
                "pooled",
                ("em@2", "em@4"),
                method="general",
            ),
            tmp_path,
        ),
    ]
    assert rows[0].values["default"] == (0.7, 0.9) and rows[0].split == "test 3"
    assert rows[1].split == "test 7" and rows[1].n == 8
    assert rows[1].values["ours"] == (0.75, 1.0) and rows[1].values["dense"] == (0.125, 0.125)
    versus = rows[0].versus_best("default")
    assert versus is not None and [b for b, _ in versus] == ["dense", "dense+bm25"]  # the best
    assert [d.diff for _, d in versus] == pytest.approx([0.1, -0.1])
    babi = rows[1].versus_best("ours")
    assert babi is not None and babi[0][0] == "dense" and babi[0][1].diff == pytest.approx(0.625)
    assert rows[2].split == "test (bucket 0)" and rows[2].versus_best("general") is None
    lines = summary.table(rows).splitlines()
    assert len(lines) == 2 + 3
    assert "| default - best of dense, bm25, dense+bm25, paired |" in lines[0]
    assert "**0.700 / 0.900**" in lines[2] and "(dense) / -0.100 [" in lines[2]
    assert lines[2].endswith("(dense+bm25) |")
    assert "**0.750 / 1.000**" in lines[3] and "| 0.125 / 0.125 |" in lines[3]
    assert "]* (dense) / " in lines[3]
    assert lines[4].endswith("| - |") and "| - | - | - |" in lines[4]  # no bm25 / hybrid / pairs


def test_missing_cell_or_method_is_named(tmp_path: Path) -> None:
    name = _write(tmp_path, "b.json", _babilong("ours"))
    with pytest.raises(ValueError, match="no bAbI cell at 32000"):
        summary.row_of(
            summary.Source("b", name, "babilong", "32000", ("em@facts", "em@budget")), tmp_path
        )
    with pytest.raises(ValueError, match="no method 'default'"):
        summary.row_of(
            summary.Source("b", name, "babilong", "4000", ("em@facts", "em@budget")), tmp_path
        )
    with pytest.raises(ValueError, match="unknown result kind"):
        summary.row_of(summary.Source("b", name, "ruler", "4000", ("a", "b")), tmp_path)


@pytest.mark.parametrize("source", summary.SOURCES, ids=lambda s: f"{s.path}:{s.cell}")
def test_every_shipped_source_reads(source: summary.Source) -> None:
    """The README's summary table reads committed result files only."""
    row = summary.row_of(source)
    assert row.n > 0 and all(0.0 <= v <= 1.0 for v in row.values[source.method])


def test_another_method_skips_runs_without_it(tmp_path: Path, monkeypatch, capsys) -> None:
    name = _write(tmp_path, "b.json", _babilong("ours"))
    sources = (
        summary.Source("with", name, "babilong", "4000", ("em@facts", "em@budget"), method="ours"),
    )
    monkeypatch.setattr(summary, "SOURCES", sources)
    monkeypatch.setattr(summary, "BENCHMARKS", tmp_path)
    summary.main(["--method", "dense"])
    out = capsys.readouterr().out
    assert "| bm25 | dense+bm25 | untrained |" in out and "**0.125 / 0.125**" in out
    summary.main(["--method", "untrained"])
    assert "not run with untrained: b.json:4000" in capsys.readouterr().out


def test_readme_shows_the_summary_as_generated() -> None:
    """The README's table of the default is this script's output, not numbers typed by hand."""
    readme = (summary.BENCHMARKS.parent / "README.md").read_text(encoding="utf-8")
    assert summary.table([summary.row_of(s) for s in summary.SOURCES]) in readme
