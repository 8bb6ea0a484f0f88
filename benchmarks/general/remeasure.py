"""Measure every held-out cell of the README's default table again, for another model, on new
seeds: the runs a switch of the default needs, as one background job.

    python -m benchmarks.general.remeasure --model DIR --seed 20261148 --val-seed 555563          # print
    python -m benchmarks.general.remeasure --model DIR --seed 20261148 --val-seed 555563 --run    # run

Each result file that ``summary.SOURCES`` reads is remade from the command recorded in it (the
same cells, sizes, baselines and thread count), with the model in place of the ones it ran
(under the method name the summary reads), a new seed (test files: ``--seed``, one more for each
file; validation files: ``--val-seed``), only the cells the table reads, and a new output file
beside the old one (``<name>_<seed>``); a file without a seed (HotpotQA bucket 0, every
question) keeps its questions and is named with the test seed it would have had. The runs go
one after another, each with its log beside its output. Point ``SOURCES`` at the new files
afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.general.summary import BENCHMARKS, SOURCES, Source
from benchmarks.harness.results import command_words, flag_value

#: The repository root, where the recorded commands run.
ROOT = BENCHMARKS.parent

#: Per benchmark kind, the flag that names a model to evaluate (``NAME=SPEC``).
MODEL_FLAG = {"general": "--model", "babilong": "--checkpoint", "hotpotqa": "--checkpoint"}


@dataclass(frozen=True)
class Rerun:
    """One result file to make again."""

    source: Source
    """The first summary row that reads the file (the method name comes from it)."""
    argv: list[str]
    """The command, ready for :func:`subprocess.run` from the repository root."""
    out: Path
    """The new result file."""


def _without(words: list[str], flag: str) -> list[str]:
    """``words`` without every ``flag VALUE`` pair."""
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == flag:
            skip = True
        else:
            kept.append(word)
    return kept


def _set(words: list[str], flag: str, value: str) -> list[str]:
    return [*_without(words, flag), flag, value]


#: Per benchmark kind, the flag that lists the cells a run measures (``None``: all of them).
CELLS_FLAG = {"general": "--cells", "babilong": "--lengths", "hotpotqa": None}


def rerun_of(
    source: Source, command: str, model: str, seed: int, cells: Sequence[str] = ()
) -> Rerun:
    """The recorded ``command`` of ``source``'s file with ``model`` (as ``source.method``),
    ``seed`` (where the command has one; it names the new file in any case), only ``cells``
    (where given and the benchmark lists them) and a new output path.

    Raises:
        ValueError: the command lacks ``--out`` or runs another module than ``python -m ...``.
    """
    words = command_words(command)
    if words[:2] != ["python", "-m"]:
        raise ValueError(f"{source.path}: not a `python -m` command: {command!r}")
    out = flag_value(words, "--out")
    if out is None:
        raise ValueError(f"{source.path}: its command has no --out: {command!r}")
    words = _set(
        _without(words, MODEL_FLAG[source.kind]),
        MODEL_FLAG[source.kind],
        f"{source.method}={model}",
    )
    if cells and CELLS_FLAG[source.kind] is not None:
        words = _set(words, CELLS_FLAG[source.kind], ",".join(cells))
    if flag_value(words, "--seed") is not None:
        words = _set(words, "--seed", str(seed))
    # beside the file the table reads, wherever the recorded run wrote it (a scratch folder)
    old = BENCHMARKS.relative_to(ROOT) / source.path
    new = old.with_name(f"{old.stem}_{seed}{old.suffix}")
    words = _set(words, "--out", str(new))
    return Rerun(source, [sys.executable, *words[1:]], ROOT / new)


def plan(model: str, seed: int, val_seed: int, sources: Sequence[Source] = SOURCES) -> list[Rerun]:
    """One :class:`Rerun` per result file of ``sources``, test files on ``seed``, ``seed + 1``, ...

    Raises:
        FileExistsError: a new output file is already there (nothing is replaced).
    """
    reruns, next_seed = [], seed
    files: dict[str, list[Source]] = {}
    for source in sources:
        files.setdefault(source.path, []).append(source)
    for path, reading in files.items():
        command = json.loads((BENCHMARKS / path).read_text())["command"]
        words = command_words(command)
        cells = [s.cell for s in reading]  # only the cells the table reads
        if flag_value(words, "--split") == "val":
            rerun = rerun_of(reading[0], command, model, val_seed, cells)
        else:
            rerun = rerun_of(reading[0], command, model, next_seed, cells)
            next_seed += flag_value(words, "--seed") is not None
        if rerun.out.exists():
            raise FileExistsError(f"{rerun.out} exists; choose other seeds")
        reruns.append(rerun)
    return reruns


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        required=True,
        help="checkpoint folder or packaged:NAME, with :key=value settings",
    )
    parser.add_argument("--seed", type=int, required=True, help="first unused test seed")
    parser.add_argument("--val-seed", type=int, required=True, help="an unused validation seed")
    parser.add_argument("--run", action="store_true", help="run them (default: print them)")
    args = parser.parse_args(argv)
    reruns = plan(args.model, args.seed, args.val_seed)
    for rerun in reruns:
        print(shlex.join(rerun.argv))
    if not args.run:
        return
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, ["training", ".", os.environ.get("PYTHONPATH")])
        ),
    }
    for rerun in reruns:
        log = rerun.out.with_suffix(".log")
        with log.open("x") as handle:
            done = subprocess.run(
                rerun.argv, check=False, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT
            )
        if done.returncode:
            raise SystemExit(f"{shlex.join(rerun.argv)} failed ({done.returncode}); see {log}")
        print(f"wrote {rerun.out}")


if __name__ == "__main__":
    main()
