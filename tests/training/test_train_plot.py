"""The training-curve plots: one run's panels and several runs compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qrag_training.plot import compare_runs, main


def _metrics(folder: Path, values: list[float]) -> Path:
    folder.mkdir(parents=True)
    rows = [{"step": 0, "eval/fact_em": values[0]}]
    rows += [
        {"step": 10 * i, "seconds": 6.0 * i, "eval/fact_em": v, "loss": 1.0 / i}
        for i, v in enumerate(values[1:], 1)
    ]
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    return folder


def test_compare_runs_writes_one_png(tmp_path: Path) -> None:
    a = _metrics(tmp_path / "a", [0.3, 0.5, 0.6])
    b = _metrics(tmp_path / "b", [0.3, 0.4])
    out = compare_runs({"run a": a, "run b": b / "metrics.jsonl"}, tmp_path / "cmp.png", title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_compare_needs_out_and_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _metrics(tmp_path / "a", [0.3, 0.5])
    with pytest.raises(SystemExit):
        main(["--compare", f"a={a}"])
    with pytest.raises(SystemExit):
        main(["--compare", str(a), "--out", str(tmp_path / "x.png")])
    main(["--compare", f"a={a}", "--out", str(tmp_path / "x.png")])
    assert capsys.readouterr().out.strip().endswith("x.png")
    with pytest.raises(SystemExit):
        main([])
