"""The mixture data set: shares by weight, interleaving, seeds per part, and the Hydra env."""

from __future__ import annotations

from collections import Counter

import pytest
from qrag_training.data.episode import Episode
from qrag_training.data.mixture import interleave, mixture_dataset, shares
from qrag_training.data.registry import load_dataset
from qrag_training.evaluate import compose_config
from qrag_training.settings import load_episodes, run_config_from


def test_shares_follow_the_weights_and_sum_to_n() -> None:
    assert shares([2, 2, 0.5, 0.5], 100) == [40, 40, 10, 10]
    assert sum(shares([1, 1, 1], 10)) == 10 and sorted(shares([1, 1, 1], 10)) == [3, 3, 4]
    assert shares([1, 0], 5) == [5, 0]
    with pytest.raises(ValueError, match=">= 0"):
        shares([1, -1], 5)
    with pytest.raises(ValueError, match="zero"):
        shares([0, 0], 5)


def test_interleave_keeps_every_prefix_near_the_shares() -> None:
    merged = interleave([list("aaaaaaaa"), list("bb"), list("cccc")])
    assert sorted(merged) == sorted("aaaaaaaabbcccc")
    first_half = Counter(merged[:7])
    assert first_half["a"] == 4 and first_half["b"] == 1 and first_half["c"] == 2


def _fake(prefix: str):
    def load(n: int = 3, seed: int = 0, limit: int | None = None, **_: object) -> list[Episode]:
        return [
            Episode(id=f"{prefix}-{seed}-{i}", question="q?", chunks=["a", "b"], support=[0])
            for i in range(n)
        ]

    return load


def test_generated_parts_get_their_share_and_their_own_seeds() -> None:
    loaders = {"gen": _fake("gen"), "other": _fake("other")}
    parts = [{"name": "gen", "weight": 3, "seed": 5}, {"name": "other", "weight": 1, "seed": 5}]
    episodes = mixture_dataset(parts, n=8, seed=2, loaders=loaders)
    tags = Counter(e.meta["mixture_part"] for e in episodes)
    assert tags == {"0:gen": 6, "1:other": 2}
    seeds = {e.id.split("-")[1] for e in episodes}
    assert len(seeds) == 2  # the two parts never share a seed
    again = mixture_dataset(parts, n=8, seed=3, loaders=loaders)
    assert {e.id for e in again}.isdisjoint(
        {e.id for e in episodes}
    )  # a new pool seed: new episodes
    assert [e.id for e in mixture_dataset(parts, n=8, seed=2, loaders=loaders)] == [
        e.id for e in episodes
    ]


def test_unknown_parts_are_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="part 1: unknown data set 'nope'.*valid: gen"):
        mixture_dataset([{"name": "gen"}, {"name": "nope"}], n=4, loaders={"gen": _fake("gen")})
    with pytest.raises(ValueError, match="at least one part"):
        mixture_dataset([], n=4, loaders={"gen": _fake("gen")})
    with pytest.raises(ValueError, match="unknown data set 'mixture'"):
        load_dataset("mixture", parts=[{"name": "mixture"}], n=4)


def test_real_generators_mix_through_the_registry() -> None:
    parts = [
        {
            "name": "babilong",
            "weight": 1,
            "task": ["qa1", "qa2"],
            "target_tokens": 300,
            "noise_kind": "bible",
            "seed": 0,
        },
        {
            "name": "ruler",
            "weight": 1,
            "variant": "niah_single",
            "target_tokens": 300,
            "noise_kind": "bible",
            "seed": 0,
        },
    ]
    episodes = load_dataset("mixture", parts=parts, n=6, seed=1)
    assert len(episodes) == 6
    assert Counter(e.id.split("-")[0] for e in episodes) == {"babilong": 3, "ruler": 3}
    for e in episodes:
        e.validate()


def test_the_mixture_env_composes_and_loads_both_splits() -> None:
    cfg = compose_config(
        "mixture",
        [
            "out_dir=runs/x",
            "eval_episodes=10",
            "env.pool_size=10",
            "env.train.parts.0.weight=0",
            "env.eval.parts.0.weight=0",
        ],
    )
    run = run_config_from(cfg)
    train = load_episodes(cfg, run, "train", pool_pass=1)
    held_out = load_episodes(cfg, run, "eval")
    assert len(train) == 10 and len(held_out) == 10
    assert {e.meta["mixture_part"].split(":")[1] for e in train} == {"babilong", "ruler"}
    assert {e.id for e in train}.isdisjoint({e.id for e in held_out})


@pytest.mark.slow
def test_preset_general_cpu_trains_from_the_base_encoder_without_positions(
    tmp_path, tiny_bert_dir
) -> None:
    from qrag_training.trainer import Trainer

    cfg = compose_config(
        "mixture",
        [
            "preset=general_cpu",
            "model=tiny",
            f"model.base_model={tiny_bert_dir}",
            f"out_dir={tmp_path / 'run'}",
            "model.trainable_layers=1",
            "steps=2",
            "eval_interval=2",
            "eval_episodes=8",
            "report_episodes=8",
            "env.pool_size=16",
            "torch_threads=1",
            "algo.questions_per_step=4",
            "algo.warmup=1",
        ],
    )
    assert cfg.init_from is None and cfg.env.position_mode == "none"
    assert cfg.model.normalize and cfg.model.question_weight == 3.0
    assert cfg.algo.hard_negatives == 8 and cfg.algo.in_batch_negatives
    assert list(cfg.env.train.parts[1].target_tokens) == [1000, 2000, 4000]
    Trainer(cfg).train()
    assert (tmp_path / "run" / "best" / "qrag_config.json").is_file()
