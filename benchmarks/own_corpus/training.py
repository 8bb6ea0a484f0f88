"""The training half of the own-corpus benchmarks: one ``qrag-train`` run as a user starts it
(a subprocess, offline), and what its ``metrics.jsonl`` says about it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Picks per question in the own-corpus reports (preset=custom_cpu's env.max_steps).
PICKS = 3


def run_training(overrides: Sequence[str], run_dir: Path) -> dict[str, Any]:
    """Run ``qrag-train`` with ``overrides`` (``out_dir`` must be ``run_dir``) and summarise it:
    wall time, updates, updates per second and the validation record that chose ``best/``."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "qrag_training.train", *overrides],
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    wall = time.perf_counter() - started
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    last = records[-1]
    return {
        "train_overrides": list(overrides),
        "wall_seconds": round(wall, 1),
        "updates": int(last["step"]),
        "train_loop_seconds": last.get("seconds"),
        "updates_per_second": int(last["step"]) / wall,
        "validation": [  # what chose best/: the preset's checkpoint_metric, per evaluation
            {k: r[k] for k in ("step", "eval/fact_em", "eval/fact_em_at_facts") if k in r}
            for r in records
            if "eval/fact_em" in r
        ],
    }


def custom_questions(path: Path, split: str | None, *overrides: str) -> tuple[Any, list]:
    """The composed ``custom`` config for the JSONL ``path`` and all its questions of hash
    ``split`` (``None``: every line), as the trainer loads held-out questions."""
    from qrag_training.evaluate import compose_config
    from qrag_training.settings import load_episodes, run_config_from

    cfg = compose_config(
        "custom",
        [
            f"env.path={path}",
            f"env.eval_hash_split={'null' if split is None else split}",
            "eval_episodes=100000",
            *overrides,
        ],
    )
    return cfg, load_episodes(cfg, run_config_from(cfg), "eval")
