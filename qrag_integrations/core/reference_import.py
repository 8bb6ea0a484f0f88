"""Import checkpoints written by the paper's reference code (github.com/griver/Q-RAG).

A reference run folder holds ``config.yaml`` (Hydra) and ``model_best.pt`` / ``model_last.pt``:
a dict whose ``"critic"`` entry is the state dict of the Q-network, with keys
``state_embed.model.<encoder keys>`` and ``action_embed.model.model.<encoder keys>``. It is read
with ``torch.load(..., weights_only=True)``: tensors and plain containers only, no pickle code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import yaml

from qrag_integrations.core.config import PositionMode, QRAGConfig, StateOrder
from qrag_integrations.core.errors import CheckpointError
from qrag_integrations.core.model import QRAGModel

STATE_PREFIX = "state_embed.model."
CHUNK_PREFIX = "action_embed.model.model."
CRITIC_KEY = "critic"


def _get(cfg: dict[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def reference_config(cfg: dict[str, Any], base_model: str | None = None) -> QRAGConfig:
    """Translate a reference ``config.yaml`` (as a dict) into a :class:`QRAGConfig`."""
    base = base_model or _get(cfg, "algo.model.model_name")
    if not base:
        raise CheckpointError(
            "config.yaml names no encoder (algo.model.model_name); pass base_model="
        )
    mode = str(_get(cfg, "envs.positions_processor", "relative"))
    if mode == "random":
        mode = PositionMode.ABSOLUTE.value  # random offsets are a training-time augmentation
    step = _get(cfg, "envs.positions_processor_dict.relative.step_size", 20)
    chunk_tokens = _get(cfg, "max_action_length", 64)
    state_tokens = _get(cfg, "max_action_length_in_memory", chunk_tokens)
    sort_by_index = _get(cfg, "envs.sort_by_index", _get(cfg, "envs.env.sort_by_index", True))
    separator = _get(cfg, "envs.env.separator", " [SEP] ")
    return QRAGConfig(
        base_model=str(base),
        position_mode=PositionMode(mode),
        relative_step=int(step) if isinstance(step, (int, float)) else 20,
        max_chunk_tokens=int(chunk_tokens) if isinstance(chunk_tokens, int) else 64,
        max_state_tokens=int(state_tokens) if isinstance(state_tokens, int) else 64,
        state_separator=separator if isinstance(separator, str) else " [SEP] ",
        state_order=StateOrder.DOCUMENT if sort_by_index is not False else StateOrder.PICK,
        normalize=False,  # the reference divides the mean-pooled output by 10
        question_weight=0.0,  # the paper's Q: no question anchoring
        extra={"imported_from": "griver/Q-RAG reference checkpoint"},
    )


def import_reference_checkpoint(
    path: str | os.PathLike[str],
    base_model: str | None = None,
    which: str = "best",
    device: str | torch.device = "cpu",
) -> QRAGModel:
    """Load a reference-code checkpoint as a :class:`QRAGModel`.

    Args:
        path: the run folder (with ``config.yaml``) or the ``.pt`` file itself.
        base_model: encoder name or local folder giving the architecture and tokenizer; defaults
            to ``algo.model.model_name`` from ``config.yaml`` (a hub name needs network access).
        which: ``"best"`` or ``"last"`` when ``path`` is a folder.
        device: where to put the model.

    Raises:
        CheckpointError: missing files, unreadable YAML or state dict, or keys that do not match
            the encoder architecture.
    """
    path = Path(path)
    if path.is_dir():
        weights_file = path / f"model_{which}.pt"
        config_file = path / "config.yaml"
    else:
        weights_file, config_file = path, path.parent / "config.yaml"
    for file in (weights_file, config_file):
        if not file.is_file():
            raise CheckpointError(f"reference checkpoint file {file} is missing")
    try:
        cfg = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise CheckpointError(f"cannot parse {config_file}: {exc}") from exc
    config = reference_config(cfg, base_model)
    try:
        blob = torch.load(weights_file, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"cannot read {weights_file} as a weights-only state dict: {exc}"
        ) from exc
    critic = blob.get(CRITIC_KEY, blob) if isinstance(blob, dict) else None
    if not isinstance(critic, dict):
        raise CheckpointError(f"{weights_file} holds no '{CRITIC_KEY}' state dict")

    model = QRAGModel.from_base(config)
    for prefix, encoder in (
        (STATE_PREFIX, model.state_encoder),
        (CHUNK_PREFIX, model.chunk_encoder),
    ):
        sub = {k[len(prefix) :]: v for k, v in critic.items() if k.startswith(prefix)}
        if not sub:
            raise CheckpointError(f"{weights_file}: no '{prefix}*' keys in the critic state dict")
        target = encoder.model.state_dict()
        missing = [k for k in target if k not in sub]
        if missing:
            raise CheckpointError(
                f"{weights_file}: the {prefix[:-1]} weights do not fit {config.base_model!r} "
                f"(missing {missing[:3]})"
            )
        for key, value in target.items():
            if sub[key].shape != value.shape:
                raise CheckpointError(
                    f"{weights_file}: {prefix}{key} has shape {tuple(sub[key].shape)}, "
                    f"{config.base_model!r} expects {tuple(value.shape)}"
                )
        encoder.model.load_state_dict({k: sub[k] for k in target}, strict=True)
    return model.to(device).eval()
