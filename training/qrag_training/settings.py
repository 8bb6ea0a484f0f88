"""Turn the composed Hydra config into typed objects (model config, learner config, data, reward).

Shared by ``qrag-train`` and ``qrag-eval`` so both read the config tree the same way.
"""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import DictConfig, OmegaConf

from qrag_integrations.config import QRAGConfig
from qrag_training.data.episode import Episode
from qrag_training.data.registry import load_dataset
from qrag_training.data.splits import split_of
from qrag_training.env import EnvSettings
from qrag_training.feedback import Feedback, build_feedback
from qrag_training.next_hop import NextHopConfig
from qrag_training.pqn import PQNConfig

logger = logging.getLogger(__name__)

#: Env-group fields that become QRAGConfig fields.
_ENV_MODEL_FIELDS = (
    "position_mode",
    "relative_step",
    "relative_span",
    "state_order",
    "max_state_tokens",
    "max_chunk_tokens",
    "state_separator",
)
#: Model-group fields that become QRAGConfig fields.
_MODEL_FIELDS = ("base_model", "trainable_layers", "output_scale", "normalize", "question_weight", "rope_theta")
#: ``algo.kind`` values: the learner each builds its config for.
ALGO_KINDS = ("pqn", "next_hop")


def to_container(node: Any) -> Any:
    """A resolved plain-Python copy of a config node."""
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def model_config_from(cfg: DictConfig) -> QRAGConfig:
    """The :class:`QRAGConfig` described by the ``model`` and ``env`` groups."""
    fields: dict[str, Any] = {k: cfg.model[k] for k in _MODEL_FIELDS}
    fields.update({k: cfg.env[k] for k in _ENV_MODEL_FIELDS})
    return QRAGConfig(**to_container(OmegaConf.create(fields)))


def algo_kind(cfg: DictConfig) -> str:
    """``algo.kind``: ``pqn`` (the paper's learner, the default) or ``next_hop`` (warm start)."""
    kind = str(cfg.algo.get("kind", "pqn"))
    if kind not in ALGO_KINDS:
        raise ValueError(f"unknown algo.kind {kind!r}; valid: {', '.join(ALGO_KINDS)}")
    return kind


def _algo_fields(cfg: DictConfig) -> dict[str, Any]:
    fields = to_container(cfg.algo)
    fields.pop("kind", None)
    fields["total_updates"] = int(cfg.steps)
    return fields


def pqn_config_from(cfg: DictConfig) -> PQNConfig:
    """The PQN config of the ``algo`` group; the schedule length is the top-level ``steps``."""
    return PQNConfig(**_algo_fields(cfg))


def next_hop_config_from(cfg: DictConfig) -> NextHopConfig:
    """The next-hop warm-start config of the ``algo`` group (``algo=next_hop``)."""
    return NextHopConfig(**_algo_fields(cfg))


def env_settings_from(cfg: DictConfig, model_config: QRAGConfig) -> EnvSettings:
    """Episode settings; positions follow the model's config (which a checkpoint may fix)."""
    return EnvSettings.from_model_config(int(cfg.env.max_steps), model_config)


def feedback_from(cfg: DictConfig) -> Feedback:
    """The reward of the ``feedback`` group."""
    fields = to_container(cfg.feedback)
    return build_feedback(fields.pop("kind"), **fields)


def _hash_split(episodes: list[Episode], split: str | None) -> list[Episode]:
    if split is None:
        return episodes
    return [e for e in episodes if split_of(e.id) == split]


def load_episodes(cfg: DictConfig, which: str, pool_pass: int = 0, needs_support: bool = True) -> list[Episode]:
    """Load the training pool (``which="train"``) or the held-out episodes (``"eval"``).

    Args:
        cfg: composed config.
        which: ``train`` or ``eval``.
        pool_pass: for the training pool with ``env.refresh_pool``: the pass number; the seed
            becomes ``seed * 1000 + pool_pass`` so every pass sees new episodes.
        needs_support: drop episodes without supporting-fact labels (with a warning).
    """
    if which not in ("train", "eval"):
        raise ValueError(f"which must be train or eval, got {which!r}")
    kwargs = to_container(cfg.env[which])
    if which == "train" and cfg.env.get("refresh_pool", False) and "seed" in kwargs:
        kwargs["seed"] = int(kwargs["seed"]) * 1000 + pool_pass
    episodes = load_dataset(str(cfg.env.name), **kwargs)
    episodes = _hash_split(episodes, cfg.env.get(f"{which}_hash_split"))
    if needs_support:
        kept = [e for e in episodes if e.support]
        if len(kept) < len(episodes):
            logger.warning("dropped %d %s episodes without supporting facts", len(episodes) - len(kept), which)
        episodes = kept
    if which == "eval":
        episodes = episodes[: int(cfg.eval_episodes)]
    if not episodes:
        raise ValueError(f"no {which} episodes for env {cfg.env.name!r} with {kwargs}")
    return episodes
