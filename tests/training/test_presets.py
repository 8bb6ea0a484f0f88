"""The GPU presets are the recipes of the shipped checkpoints: each composes to the settings in the
``train_config`` its checkpoint's ``qrag_config.json`` records, every one from the next-hop learner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from qrag_training.evaluate import compose_config

ASSETS = Path(__file__).resolve().parents[2] / "qrag_integrations" / "assets"
#: Settings of the machine and the call, not of the recipe: where files were, how long the lent
#: machine was held, whether the end-of-run report (which needs bm25s) ran there; and the rollout
#: shape, which the next-hop learner does not read.
NOT_THE_RECIPE = {
    "path",
    "base_model",
    "out_dir",
    "init_from",
    "time_budget_minutes",
    "final_report",
    "batch_size",
    "envs_parallel",
}


def _differences(shipped: Any, composed: Any, where: str = "") -> list[str]:
    if isinstance(shipped, dict):
        if not isinstance(composed, dict):
            return [f"{where}: {shipped!r} vs {composed!r}"]
        return [
            d
            for key, value in shipped.items()
            if key not in NOT_THE_RECIPE
            for d in _differences(value, composed.get(key, "<missing>"), f"{where}.{key}")
        ]
    if isinstance(shipped, list) and isinstance(composed, list) and len(shipped) == len(composed):
        return [
            d
            for i, (a, b) in enumerate(zip(shipped, composed))
            for d in _differences(a, b, f"{where}[{i}]")
        ]
    return [] if shipped == composed else [f"{where}: shipped {shipped!r}, preset {composed!r}"]


@pytest.mark.parametrize(
    ("preset", "asset"),
    [
        ("general_gpu", "general_checkpoint"),
        ("hotpotqa_gpu", "hotpotqa_checkpoint"),
        ("babi_gpu", "demo_checkpoint"),
    ],
)
def test_the_preset_composes_to_the_shipped_checkpoints_recipe(preset: str, asset: str) -> None:
    manifest = json.loads((ASSETS / asset / "qrag_config.json").read_text())
    shipped = manifest["config"]["extra"]["train_config"]
    assert shipped["algo"]["kind"] == "next_hop"
    cfg = compose_config(shipped["env"]["name"], [f"preset={preset}", "out_dir=x"])
    composed = OmegaConf.to_container(cfg, resolve=True)
    assert _differences(shipped, composed) == []


def test_help_opens_with_the_presets_and_the_settings_a_user_sets() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "qrag_training.train", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = run.stdout.splitlines()
    assert lines[0].startswith("qrag-train:") and len(lines) < 45  # not the whole config tree
    presets = sorted(
        p.stem
        for p in (
            Path(__file__).resolve().parents[2] / "training" / "qrag_training" / "conf" / "preset"
        ).glob("*.yaml")
    )
    head = "\n".join(lines[: lines.index("Config groups (group=option):")])
    assert all(name in head for name in presets), presets
    for setting in (
        "env.path=",
        "out_dir=",
        "steps=",
        "time_budget_minutes=",
        "device=",
        "preset=custom_cpu",
    ):
        assert setting in head
