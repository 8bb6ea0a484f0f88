"""The run settings are read once from the composed Hydra config into a typed ``RunConfig``."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf.errors import ValidationError
from qrag_training.evaluate import compose_config
from qrag_training.settings import RunConfig, run_config_from


def test_defaults_are_those_of_train_yaml() -> None:
    """A RunConfig built in code means what the same run started from the YAML means."""
    run = run_config_from(compose_config("babilong", ["out_dir=runs/x"]))
    defaults = RunConfig(out_dir="runs/x")
    differ = {
        f.name
        for f in dataclasses.fields(RunConfig)
        if getattr(run, f.name) != getattr(defaults, f.name)
    }
    assert differ == {
        "refresh_pool"
    }  # babilong generates a new pool every pass; the env default does not
    assert run.refresh_pool is True and run.max_steps == 6


def test_values_are_typed_once_and_interpolations_resolved() -> None:
    cfg = compose_config(
        "hotpotqa",
        [
            "out_dir=runs/x",
            "steps=12",
            "eval_interval=4",
            "torch_threads=2",
            "init_from=runs/warm/best",
        ],
    )
    run = run_config_from(cfg)
    assert (run.steps, run.eval_interval, run.save_interval) == (
        12,
        4,
        4,
    )  # save_interval: ${eval_interval}
    assert run.torch_threads == 2 and run.init_from == "runs/warm/best"
    assert run.max_steps == cfg.env.max_steps == 2 and run.refresh_pool is False
    assert run.rollout_len == run.batch_size // run.envs_parallel


def test_a_value_of_the_wrong_type_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="eval_batch"):
        run_config_from(compose_config("babilong", ["out_dir=x", "eval_batch=many"]))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"batch_size": 10, "envs_parallel": 4},
            r"batch_size \(10\) must be a multiple of envs_parallel \(4\)",
        ),
        ({"log_interval": 0}, "log_interval must be >= 1"),
        ({"steps": -1}, "steps must be >= 0"),
        (
            {"checkpoint_metric": "fact_em@2"},
            "checkpoint_metric must be one of fact_em, fact_em_at_facts",
        ),
    ],
)
def test_inconsistent_settings_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig(out_dir="x", **changes)
