"""Data-parallel training throughput: ``qrag-train`` in 1 process vs 2 processes under torchrun.

The same small PQN run (packaged MiniLM with only its top layer trained, BabiLong qa1 in short
haystacks, per-rank batch 16) is trained once in one process and once with
``torchrun --nproc_per_node 2`` (gloo, CPU), one torch / OpenMP thread per process in both. The
per-rank batch is the same, so the 2-process run's optimiser steps each take twice the
transitions (global batch = per-rank batch x ranks). Throughput is read from ``metrics.jsonl``
(the trainer's own training clock, evaluation excluded) between update ``--skip`` and the last.

    python -m benchmarks.ddp.run --steps 20

Writes ``benchmarks/ddp/results/ddp_throughput.json``. On a GPU machine the same run uses NCCL
(``device=cuda``), which this script does not exercise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import results as harness

RESULTS = Path(__file__).resolve().parent / "results"

REPO = Path(__file__).resolve().parents[2]
CONFIG = [
    "model=minilm",
    "model.trainable_layers=1",
    "env.task=qa1",
    "env.target_tokens=250",
    "env.pool_size=200",
    "env.max_steps=2",
    "batch_size=16",
    "envs_parallel=4",
    "eval_at_start=false",
    "eval_episodes=4",
    "log_interval=1",
    "torch_threads=1",
    "algo.warmup=2",
    "algo.learning_start=16",
    "algo.accumulate_grads=1",
]


def train(procs: int, out_dir: Path, steps: int) -> dict:
    """One run; returns its wall time (start-up included) and its metric rows."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "training"), str(REPO), env.get("PYTHONPATH", "")]
    )
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={procs}",
    ]
    cmd = [
        *(launcher if procs > 1 else [sys.executable]),
        "-m",
        "qrag_training.train",
        *CONFIG,
        f"steps={steps}",
        f"eval_interval={steps}",
        f"out_dir={out_dir}",
    ]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    wall = time.perf_counter() - started
    if proc.returncode:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    rows = [
        json.loads(line)
        for line in (out_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return {"wall_seconds": round(wall, 1), "rows": rows}


def rates(rows: list[dict], skip: int) -> dict:
    """Updates/s and env-steps/s between update ``skip`` and the last one (training clock)."""
    first = next(r for r in rows if r.get("step") == skip)
    last = rows[-1]
    seconds = last["seconds"] - first["seconds"]
    updates = last["step"] - first["step"]
    env_steps = last["env_steps"] - first["env_steps"]
    return {
        "updates": updates,
        "seconds": round(seconds, 1),
        "updates_per_s": round(updates / seconds, 3),
        "env_steps_per_s": round(env_steps / seconds, 1),
        "env_steps_per_update": env_steps // updates,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="optimiser steps per run")
    parser.add_argument(
        "--skip", type=int, default=3, help="first updates left out (start-up, random acting)"
    )
    parser.add_argument("--out", default=str(RESULTS / "ddp_throughput.json"))
    args = parser.parse_args(argv)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for procs in (1, 2):
            result = train(procs, Path(tmp) / f"run{procs}", args.steps)
            runs[f"{procs}_process"] = {
                "processes": procs,
                "threads_per_process": 1,
                "per_rank_batch": 16,
                "global_batch": 16 * procs,
                "wall_seconds_with_startup": result["wall_seconds"],
                **rates(result["rows"], args.skip),
            }
            print(runs[f"{procs}_process"])
    out = {
        "benchmark": "ddp_throughput",
        "command": harness.command_line(argv),
        "code": harness.code_version(),
        "machine": harness.machine_info(
            1,
            "cpu",
            processes_compared=[1, 2],
            backend="gloo",
            note="2 CPU cores shared with other jobs: bounds the 2-process speed-up",
        ),
        "config": CONFIG + [f"steps={args.steps}"],
        "runs": runs,
        "env_steps_per_s_ratio_2_over_1": round(
            runs["2_process"]["env_steps_per_s"] / runs["1_process"]["env_steps_per_s"], 2
        ),
    }
    harness.write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
