"""One schema for the trainer's settings: every key of the Hydra config tree
(``training/qrag_training/conf``) names a setting the code reads, and the files that hold the
defaults set exactly the defaults of the code that reads them, so a config built in code means what
``qrag-train`` composes from the YAML.

What each file is, from how :mod:`qrag_training.settings` reads the composed tree:

* Schema defaults (every value equals the default of the field it sets; every field is named, so
  each can be overridden on the command line): ``train.yaml``'s run settings
  (:class:`~qrag_training.settings.RunConfig`; ``out_dir`` has no default), each algo file without
  a defaults list (``algo/pqn.yaml``: :class:`~qrag_training.pqn.PQNConfig`,
  ``algo/next_hop.yaml``: :class:`~qrag_training.next_hop.NextHopConfig`, chosen by ``kind``;
  ``total_updates`` is the run's ``steps``, never a file's) and each feedback file (the keyword
  defaults of :class:`~qrag_training.feedback.GroundTruthFeedback` or of
  :meth:`LLMAnswerFeedback.from_spec <qrag_training.llm_feedback.LLMAnswerFeedback.from_spec>`
  and the constructor it calls).
* Options, whose values are their purpose (keys checked, every field read named):
  ``env/*.yaml``, one per data set (``max_steps`` and ``refresh_pool`` of ``RunConfig``, the
  episode fields of :class:`~qrag_integrations.core.config.QRAGConfig`, the loader's keyword
  arguments under ``train`` / ``eval``, and keys that only feed ``${env.<key>}`` interpolations)
  and ``model/*.yaml``, one per encoder (``QRAGConfig``'s model fields; their defaults there are
  the search library's, e.g. cosine ``normalize`` and ``question_weight`` 3, not the paper's
  training geometry these files set).
* Overrides (keys checked only): algo files with a defaults list (``algo/pqn_hotpotqa.yaml``,
  ``algo/pqn_musique.yaml``: variants of ``pqn.yaml``) and ``preset/*.yaml``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf
from qrag_training.data.mixture import PART_KEYS
from qrag_training.data.registry import LOADERS
from qrag_training.feedback import GroundTruthFeedback
from qrag_training.feedback_kinds import FEEDBACK_KINDS
from qrag_training.llm_feedback import LLMAnswerFeedback
from qrag_training.next_hop import NextHopConfig
from qrag_training.pqn import PQNConfig
from qrag_training.settings import (
    ALGO_KINDS,
    ENV_MODEL_FIELDS,
    ENV_RUN_FIELDS,
    MODEL_FIELDS,
    RunConfig,
)
from qrag_training.train import CONF_DIR

from qrag_integrations.core.config import QRAGConfig

CONF = Path(CONF_DIR)
GROUPS = ("algo", "env", "feedback", "model")
#: The learner config of each ``algo.kind``.
ALGO_CONFIGS: dict[str, type] = {"pqn": PQNConfig, "next_hop": NextHopConfig}
#: What builds each ``feedback.kind`` (:func:`qrag_training.feedback_kinds.build_feedback`).
FEEDBACK_BUILDERS: dict[str, tuple[Callable[..., Any], ...]] = {
    "ground_truth": (GroundTruthFeedback.__init__,),
    "llm": (LLMAnswerFeedback.from_spec, LLMAnswerFeedback.__init__),
}
#: Set by the run, not by a file: the schedule's length is the run's ``steps``.
NOT_IN_FILES = {"total_updates"}
#: Top-level run settings (the env group carries ``max_steps`` and ``refresh_pool``).
RUN_KEYS = {f.name for f in dataclasses.fields(RunConfig)} - set(ENV_RUN_FIELDS)
#: Env keys the code reads besides the fields of RunConfig and QRAGConfig: the loader and its
#: arguments, the hash splits (settings, trainer) and ``group_by`` (the report names it).
ENV_READ = {
    "name",
    "train",
    "eval",
    "train_hash_split",
    "eval_hash_split",
    "report_hash_split",
    "group_by",
}
ENV_REQUIRED = {"name", "train", "eval", *ENV_MODEL_FIELDS, *ENV_RUN_FIELDS}
MODEL_KEYS = {"name", *MODEL_FIELDS}  # name: the run folder's name
#: YAML values that spell a code default another way: ``{}`` is no reader options (``None`` in
#: code), kept a mapping so ``feedback.reader_options.<option>=...`` can add one.
SPELLED_OTHERWISE = {"reader_options": ({}, None)}
_NO_DEFAULT = object()


def _yaml(path: Path) -> dict[str, Any]:
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert isinstance(node, dict), path
    return {k: v for k, v in node.items() if k != "defaults"}


def _files(group: str) -> list[Path]:
    return sorted((CONF / group).glob("*.yaml"))


def _compose(*overrides: str) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=["out_dir=x", *overrides])


def _has_defaults_list(path: Path) -> bool:
    return "defaults" in OmegaConf.load(path)


def _plain(value: Any) -> Any:
    """Tuples as the lists YAML writes them."""
    return list(value) if isinstance(value, tuple) else value


def _field_defaults(cls: type) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = _NO_DEFAULT
    return out


def _param_defaults(*functions: Callable[..., Any]) -> dict[str, Any]:
    """Keyword parameters of the functions that build an object, with their defaults (a value
    one of them passes to the next, like ``from_spec``'s reader, is left out)."""
    out: dict[str, Any] = {}
    for function in functions:
        for name, p in inspect.signature(function).parameters.items():
            if name in ("self", "cls") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            out.setdefault(name, _NO_DEFAULT if p.default is p.empty else p.default)
    return out


def _feedback_defaults(kind: str) -> dict[str, Any]:
    return _param_defaults(*FEEDBACK_BUILDERS[kind])


def _algo_defaults(kind: str) -> dict[str, Any]:
    defaults = _field_defaults(ALGO_CONFIGS[kind])
    return {k: v for k, v in defaults.items() if k not in NOT_IN_FILES}


def _loader_keys(name: str) -> set[str] | None:
    """Keyword arguments of a data set's loader; ``None`` when it takes any."""
    params = inspect.signature(LOADERS[name]).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def _interpolated_env_keys(cfg: DictConfig) -> set[str]:
    """Env keys some ``${env.<key>}`` of the composed tree reads."""
    text = str(OmegaConf.to_container(cfg, resolve=False))
    return set(re.findall(r"\$\{env\.(\w+)", text))


def _unknown_loader_keys(name: str, kwargs: Mapping[str, Any], where: str) -> Iterator[str]:
    allowed = _loader_keys(name)
    if allowed is not None:
        yield from (f"{where}.{k}" for k in kwargs if k not in allowed)
    for i, part in enumerate(kwargs.get("parts", []) if name == "mixture" else []):
        part_allowed = _loader_keys(str(part["name"]))
        if part_allowed is not None:
            extra = set(part) - part_allowed - set(PART_KEYS)
            yield from (f"{where}.parts[{i}].{k}" for k in sorted(extra))


def _unknown_keys(node: Mapping[str, Any], cfg: DictConfig) -> list[str]:
    """Keys of a file (the top level, or a ``@package _global_`` preset's) that no code reads;
    the algo, feedback and data set whose settings are allowed are those ``cfg`` (the config the
    file composes to) chose."""
    out = [k for k in node if k not in (*GROUPS, "hydra") and k not in RUN_KEYS]
    algo, feedback = node.get("algo", {}), node.get("feedback", {})
    algo_keys = {"kind", *_algo_defaults(str(cfg.algo.kind))}
    out += [f"algo.{k}" for k in algo if k not in algo_keys]
    feedback_keys = {"kind", *_feedback_defaults(str(cfg.feedback.kind))}
    out += [f"feedback.{k}" for k in feedback if k not in feedback_keys]
    out += [f"model.{k}" for k in node.get("model", {}) if k not in MODEL_KEYS]
    env = node.get("env", {})
    env_keys = ENV_READ | set(ENV_MODEL_FIELDS) | set(ENV_RUN_FIELDS)
    env_keys |= _interpolated_env_keys(cfg)
    out += [f"env.{k}" for k in env if k not in env_keys]
    for which in ("train", "eval"):
        out += _unknown_loader_keys(str(cfg.env.name), env.get(which, {}), f"env.{which}")
    return out


def _drift(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """``key: yaml value vs code default`` for every value that is not its field's default."""
    out = []
    for key, value in values.items():
        default = defaults[key]
        if default is _NO_DEFAULT or SPELLED_OTHERWISE.get(key) == (value, default):
            continue
        if _plain(default) != value:
            out.append(f"{key}: yaml {value!r} vs code {default!r}")
    return out


def test_the_schema_tables_cover_every_kind_and_field() -> None:
    assert set(ALGO_CONFIGS) == set(ALGO_KINDS)
    assert set(FEEDBACK_BUILDERS) == set(FEEDBACK_KINDS)
    qrag_fields = {f.name for f in dataclasses.fields(QRAGConfig)}
    assert set(MODEL_FIELDS) | set(ENV_MODEL_FIELDS) <= qrag_fields


def test_every_file_of_the_tree_is_checked_here() -> None:
    checked = {CONF / "train.yaml"}
    checked |= {p for g in (*GROUPS, "preset") for p in _files(g)}
    assert set(CONF.rglob("*.yaml")) == checked


def test_train_yaml_sets_the_run_defaults() -> None:
    raw = _yaml(CONF / "train.yaml")
    cfg = _compose()
    assert _unknown_keys(raw, cfg) == []
    assert RUN_KEYS - set(raw) == set()
    values = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k in RUN_KEYS}
    defaults = _field_defaults(RunConfig)
    assert _drift(values, defaults) == []  # out_dir has no default


@pytest.mark.parametrize("path", _files("algo"), ids=lambda p: p.stem)
def test_algo_files_hold_the_learners_defaults_or_name_only_its_fields(path: Path) -> None:
    """A base file holds its learner config's defaults; a variant (a defaults list) only names
    fields of it."""
    raw = _yaml(path)
    cfg = _compose(f"algo={path.stem}")
    kind = str(cfg.algo.kind)
    assert _unknown_keys({"algo": raw}, cfg) == []
    if _has_defaults_list(path):
        return
    assert raw["kind"] == kind
    defaults = _algo_defaults(kind)
    assert set(defaults) - set(raw) == set()
    values = OmegaConf.to_container(cfg.algo, resolve=True)
    values.pop("kind")
    assert _drift(values, defaults) == []


def test_each_learner_has_one_base_file() -> None:
    bases = [str(_yaml(p)["kind"]) for p in _files("algo") if not _has_defaults_list(p)]
    assert sorted(bases) == sorted(ALGO_KINDS)


@pytest.mark.parametrize("path", _files("feedback"), ids=lambda p: p.stem)
def test_feedback_files_set_the_constructors_defaults(path: Path) -> None:
    raw = _yaml(path)
    cfg = _compose(f"feedback={path.stem}")
    assert _unknown_keys({"feedback": raw}, cfg) == []
    values = OmegaConf.to_container(cfg.feedback, resolve=True)
    defaults = _feedback_defaults(str(values.pop("kind")))
    assert set(defaults) - set(values) == set()
    assert _drift(values, defaults) == []


@pytest.mark.parametrize("path", _files("env"), ids=lambda p: p.stem)
def test_env_options_name_only_settings_that_are_read(path: Path) -> None:
    raw = _yaml(path)
    assert raw["name"] == path.stem
    assert ENV_REQUIRED - set(raw) == set()
    assert _unknown_keys({"env": raw}, _compose(f"env={path.stem}")) == []


@pytest.mark.parametrize("path", _files("model"), ids=lambda p: p.stem)
def test_model_options_name_every_model_field_and_nothing_else(path: Path) -> None:
    raw = _yaml(path)
    assert set(raw) == MODEL_KEYS


@pytest.mark.parametrize(
    ("preset", "choices"),
    [pytest.param(p.stem, (), id=p.stem) for p in _files("preset")]
    # its PQN continuation (docs/training.md)
    + [pytest.param("hotpotqa_cpu", ("algo=pqn_hotpotqa",), id="hotpotqa_cpu-pqn_hotpotqa")],
)
def test_presets_override_only_settings_that_are_read(preset: str, choices: tuple[str]) -> None:
    raw = _yaml(CONF / "preset" / f"{preset}.yaml")
    assert _unknown_keys(raw, _compose(f"preset={preset}", *choices)) == []


@pytest.mark.parametrize(
    ("node", "unknown"),
    [
        ({"stesp": 1}, ["stesp"]),
        ({"max_steps": 3}, ["max_steps"]),  # an env setting at the top level
        ({"algo": {"total_updates": 9, "lr": 1e-4}}, ["algo.total_updates"]),
        ({"algo": {"top_k": 3}}, []),  # a PQN field: the default learner
        ({"model": {"lexical_weight": 0.3}}, ["model.lexical_weight"]),  # not read from model
        ({"env": {"max_steps": 3, "noise": "bible", "pool": 9}}, ["env.pool"]),
        ({"env": {"train": {"task": "qa1", "limt": 3}}}, ["env.train.limt"]),
        ({"feedback": {"reader": "local"}}, ["feedback.reader"]),  # an llm setting
    ],
)
def test_the_check_finds_a_key_nobody_reads(node: dict[str, Any], unknown: list[str]) -> None:
    assert _unknown_keys(node, _compose()) == unknown


def test_the_check_finds_a_drifted_default() -> None:
    defaults = _algo_defaults("pqn")
    assert _drift({"eps": 1e-8, "betas": [0.9, 0.98]}, defaults) == [
        "eps: yaml 1e-08 vs code 1e-06"
    ]
