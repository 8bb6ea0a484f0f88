"""Data-parallel ``qrag-train`` under torchrun: 2 CPU processes (gloo) on a tiny BERT.

The ranks must end with identical weights, only rank 0 may write the run folder, and a
checkpoint must resume with another number of processes (2 -> 1 -> 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_run import TINY_RUN

#: Every test here starts torchrun with two training processes (about 20 s per run).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: ``final_lr_ratio > 0``: a resumed run with more ``steps`` never takes a step at LR 0, so its
#: weights must move.
PQN = ["algo.learning_start=8", "algo.accumulate_grads=1", "algo.final_lr_ratio=0.5"]


def launch(
    procs: int, hashes: Path, out_dir: Path, model_dir: Path, steps: int, *extra: str
) -> dict[int, dict]:
    """Train with ``procs`` processes (torchrun when more than one) through ``tests/ddp_worker.py``;
    returns each rank's report (weight fingerprints, counters)."""
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
    )
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "training"), str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")]
    )
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={procs}",
    ]
    cmd = [
        *(launcher if procs > 1 else [sys.executable]),
        str(REPO / "tests" / "ddp_worker.py"),
        str(hashes),
        *TINY_RUN,
        f"model.base_model={model_dir}",
        f"out_dir={out_dir}",
        f"steps={steps}",
        *extra,
    ]
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, env=env, timeout=400, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reports = {int(p.stem[4:]): json.loads(p.read_text()) for p in hashes.glob("rank*.json")}
    assert sorted(reports) == list(range(procs))
    return reports


def steps_logged(out_dir: Path) -> list[int]:
    lines = (out_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["step"] for line in lines if line.strip()]


def train_state(out_dir: Path) -> dict:
    return json.loads((out_dir / "last" / "train_state" / "state.json").read_text())


def test_pqn_two_ranks_identical_weights_rank0_writes_and_resume_across_world_sizes(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    out = tmp_path / "run"
    two = launch(2, tmp_path / "h2", out, tiny_bert_dir, 2, *PQN)
    assert two[0]["trained"] == two[1]["trained"] and two[0]["targets"] == two[1]["targets"]
    # both ranks stepped 4 environments for 2 rollouts of 2 steps per update: global count
    assert two[0]["env_steps"] == two[1]["env_steps"] == 2 * 2 * 8
    # rank 0 alone wrote: one metrics row per step, one TensorBoard file, the end-of-run report
    assert steps_logged(out) == [0, 1, 2]
    assert len(list((out / "tb").iterdir())) == 1
    assert sorted(p.name for p in out.iterdir()) == [
        ".best.lock",
        ".last.lock",
        "best",
        "last",
        "metrics.jsonl",
        "report.json",
        "report.md",
        "tb",
    ]
    state = train_state(out)
    assert state["world_size"] == 2 and state["agent"]["updates"] == 2

    from qrag_integrations import load_model
    from qrag_integrations.core.checkpoint import tensor_fingerprint

    assert (
        tensor_fingerprint(load_model(str(out / "last")).trained_state_dict()) == two[0]["trained"]
    )

    # 2 -> 1: the 2-rank checkpoint resumes in one process
    one = launch(1, tmp_path / "h1", out, tiny_bert_dir, 3, "resume=true", *PQN)
    assert one[0]["updates"] == 3 and one[0]["env_steps"] == 32 + 8
    assert steps_logged(out) == [0, 1, 2, 3]
    assert train_state(out)["world_size"] == 1

    # 1 -> 2: and a 1-process checkpoint in two; the ranks stay identical
    again = launch(2, tmp_path / "h3", out, tiny_bert_dir, 4, "resume=true", *PQN)
    assert again[0]["trained"] == again[1]["trained"] != one[0]["trained"]
    assert again[0]["targets"] == again[1]["targets"]
    assert again[0]["updates"] == 4 and again[0]["env_steps"] == 40 + 16
    assert steps_logged(out) == [0, 1, 2, 3, 4]
    assert len(list((out / "tb").iterdir())) == 3  # one per run: rank 0's


def test_next_hop_two_ranks_identical_weights(tmp_path: Path, tiny_bert_dir: Path) -> None:
    out = tmp_path / "warm"
    two = launch(
        2,
        tmp_path / "h",
        out,
        tiny_bert_dir,
        2,
        "algo=next_hop",
        "algo.questions_per_step=2",
        "env.position_mode=none",
    )
    assert two[0]["trained"] == two[1]["trained"]
    assert two[0]["updates"] == 2 and two[0]["env_steps"] == two[1]["env_steps"] > 0
    assert steps_logged(out) == [0, 1, 2]
    assert train_state(out)["agent"]["updates"] == 2


def test_time_budget_stops_every_rank_at_the_same_update(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    """Ranks' clocks differ; they agree to stop (else one would wait forever in a collective)."""
    out = tmp_path / "run"
    two = launch(2, tmp_path / "h", out, tiny_bert_dir, 50, "time_budget_minutes=0.0001", *PQN)
    assert two[0]["updates"] == two[1]["updates"] == 1
    assert two[0]["trained"] == two[1]["trained"]
    assert steps_logged(out) == [0, 1] and train_state(out)["agent"]["updates"] == 1


def _collectives(rank: int, world: int, init_file: str, results: dict) -> None:
    import torch
    import torch.distributed as dist
    from qrag_training.distributed import DistContext

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    ctx = DistContext(rank, world, rank)
    trained = torch.nn.Parameter(torch.zeros(2, 3))
    frozen_here = torch.nn.Parameter(
        torch.zeros(4)
    )  # no gradient on rank 1 (a branch it did not use)
    trained.grad = torch.full((2, 3), float(rank + 1))
    if rank == 0:
        frozen_here.grad = torch.arange(4.0)
    ctx.average_gradients([trained, frozen_here])
    module = torch.nn.Linear(2, 2)
    torch.nn.init.constant_(module.weight, float(rank))
    ctx.broadcast_module(module)
    results[rank] = {
        "trained": trained.grad.tolist(),
        "frozen": frozen_here.grad.tolist(),
        "sums": ctx.sum_floats([rank, 1.5]),
        "any": ctx.any(rank == 1),
        "weight": module.weight.tolist(),
        "object": ctx.broadcast_object(f"from {rank}"),
    }
    dist.destroy_process_group()


def test_collectives_average_gradients_over_ranks(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_collectives, args=(2, str(tmp_path / "init"), results), nprocs=2)
        got = dict(results)
    for rank in (0, 1):
        assert got[rank]["trained"] == [[1.5] * 3] * 2
        assert got[rank]["frozen"] == [0.0, 0.5, 1.0, 1.5]
        assert got[rank]["sums"] == [1.0, 3.0] and got[rank]["any"] is True
        assert got[rank]["weight"] == [[0.0, 0.0], [0.0, 0.0]] and got[rank]["object"] == "from 0"
