"""general/remeasure.py: the README's held-out runs remade for another model on new seeds."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks.babilong.run import parse_args as babilong_args
from benchmarks.general import remeasure, summary
from benchmarks.harness.results import command_line, command_words
from benchmarks.hotpotqa.run import parse_args as hotpotqa_args

PARSERS = {"babilong": babilong_args, "hotpotqa": hotpotqa_args}


def _flag(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == flag]


def test_every_file_of_the_table_is_remade_once_with_the_model_seeds_and_cells() -> None:
    reruns = remeasure.plan("runs/cand:lexical_depth=10", seed=7000, val_seed=9000)
    assert sorted(r.source.path for r in reruns) == sorted({s.path for s in summary.SOURCES})
    test_seeds = []
    for rerun in reruns:
        argv, kind = rerun.argv, rerun.source.kind
        assert argv[:3] == [sys.executable, "-m", f"benchmarks.{kind}.run"]
        flag = remeasure.MODEL_FLAG[kind]
        assert _flag(argv, flag) == [f"{rerun.source.method}=runs/cand:lexical_depth=10"]
        old = json.loads((summary.BENCHMARKS / rerun.source.path).read_text())["command"]
        seeds = _flag(argv, "--seed")
        if "--split val" in old:
            assert seeds == ["9000"]
        elif "--seed" in old:
            test_seeds += seeds
        assert not rerun.out.exists()
        assert _flag(argv, "--out") == [str(rerun.out.relative_to(remeasure.ROOT))]
        read = [s.cell for s in summary.SOURCES if s.path == rerun.source.path]
        cells_flag = remeasure.CELLS_FLAG[kind]
        if cells_flag is not None:
            assert _flag(argv, cells_flag) == [",".join(read)]
        if kind in PARSERS:  # the benchmark's own parser takes the command
            PARSERS[kind](argv[3:])
    assert sorted(test_seeds) == [str(7000 + i) for i in range(len(test_seeds))]
    assert len(test_seeds) >= 3


def test_an_output_already_there_is_never_replaced(tmp_path, monkeypatch) -> None:
    source = summary.Source("row", "r/a.json", "hotpotqa", "pooled", ("em@2", "em@4"))
    (tmp_path / "benchmarks" / "r").mkdir(parents=True)
    command = "python -m benchmarks.hotpotqa.run --checkpoint general=old --out benchmarks/r/a.json"
    (tmp_path / "benchmarks" / "r" / "a.json").write_text(json.dumps({"command": command}))
    monkeypatch.setattr(remeasure, "BENCHMARKS", tmp_path / "benchmarks")
    monkeypatch.setattr(remeasure, "ROOT", tmp_path)
    (rerun,) = remeasure.plan("new", 5, 6, [source])
    assert _flag(rerun.argv, "--checkpoint") == ["default=new"]
    assert rerun.out == tmp_path / "benchmarks" / "r" / "a_5.json"
    rerun.out.write_text("{}")
    with pytest.raises(FileExistsError, match="a_5.json exists"):
        remeasure.plan("new", 5, 6, [source])


def test_recorded_commands_read_back_word_for_word() -> None:
    words = ["--ruler", "", "--model", "a=b:x=1", "--note", "two words"]
    assert command_words(command_line(words))[-6:] == words
    old = "python -m benchmarks.babilong.run --ruler  --threads 2"  # unquoted, before b2054cb
    assert command_words(old)[-4:] == ["--ruler", "", "--threads", "2"]
    with pytest.raises(ValueError, match="no --out"):
        remeasure.rerun_of(summary.SOURCES[0], "python -m x --seed 1", "m", 2)


def test_run_goes_one_after_another_and_stops_at_a_failure(tmp_path, monkeypatch, capsys) -> None:
    source = summary.SOURCES[0]
    ok = remeasure.Rerun(source, [sys.executable, "-c", "print('measured')"], tmp_path / "a.json")
    bad = remeasure.Rerun(
        source, [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "b.json"
    )
    never = remeasure.Rerun(source, [sys.executable, "-c", "print(1)"], tmp_path / "c.json")
    monkeypatch.setattr(remeasure, "plan", lambda *args: [ok, bad, never])
    with pytest.raises(SystemExit, match=r"failed \(3\); see .*b\.log"):
        remeasure.main(["--model", "m", "--seed", "1", "--val-seed", "2", "--run"])
    assert (tmp_path / "a.log").read_text() == "measured\n"
    assert not (tmp_path / "c.log").exists()
