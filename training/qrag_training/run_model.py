"""The model a training run starts from: a fresh one from the base encoder, another run's
checkpoint (``init_from``), or this run's last checkpoint (resume); and seeding.

A run from a checkpoint either describes that checkpoint's model in its own config (which must
match it; token budgets, question anchoring and the search rules are then the run's) or keeps
the checkpoint's settings as they are (``keep_init_settings``: a fine-tune of the default model
searches as the default does, BM25 fusion and superseding included)."""

from __future__ import annotations

import logging
import random

import numpy as np
import torch

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel

logger = logging.getLogger(__name__)

#: Model-config fields a checkpoint may hold with another value than the run's config.
_MODEL_KEYS_THAT_MAY_DIFFER = ("extra",)
#: Settings a run that starts from another checkpoint (``init_from``) sets itself: token budgets,
#: question anchoring, BM25 fusion and superseding are read by the search, not baked into the
#: weights (a shipped checkpoint's search settings are set again when it is exported).
_SETTINGS_TAKEN_FROM_RUN = (
    "max_state_tokens",
    "max_chunk_tokens",
    "question_weight",
    "lexical_depth",
    "lexical_steps",
    "lexical_gap",
    "lexical_weight",
    "supersede_margin",
    "supersede_similarity",
)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def build_run_model(
    model_config: QRAGConfig,
    start_from: str | None,
    resuming: bool,
    device: torch.device,
    keep_settings: bool = False,
) -> QRAGModel:
    """The run's model: loaded from ``start_from`` or built from the base encoder.

    Args:
        model_config: the model the run's config describes.
        start_from: a checkpoint (``init_from``, or ``out_dir/last`` when resuming); ``None``:
            the base encoder with ``model_config``.
        resuming: ``start_from`` is this run's own last checkpoint (its settings stay as saved).
        device: where the model lives.
        keep_settings: the checkpoint's settings stay as saved, whatever ``model_config`` says
            (``keep_init_settings``); otherwise the checkpoint must hold the model
            ``model_config`` describes, apart from the settings the run sets itself.

    Raises:
        ValueError: ``start_from`` holds a different model than the config describes (and
            ``keep_settings`` is off).
    """
    if not start_from:
        return QRAGModel.from_base(model_config, device=device)
    model = load_model(str(start_from), device=device)
    if keep_settings:
        if not resuming:
            ignored = _differences(model.config, model_config)
            if ignored:
                logger.info(
                    "starting from %s with its own settings (keep_init_settings); the run's "
                    "config differs on %s",
                    start_from,
                    ", ".join(f"{k} (kept {a!r}, not {b!r})" for k, (a, b) in ignored.items()),
                )
        return model
    if not resuming:
        for key in _SETTINGS_TAKEN_FROM_RUN:
            setattr(model.config, key, getattr(model_config, key))
    diff = _differences(model.config, model_config)
    if diff:
        raise ValueError(
            f"cannot start from {start_from}: the config asks for a different model than it "
            f"holds (field: (checkpoint, config)): {diff}; keep_init_settings=true trains the "
            "checkpoint with its own settings"
        )
    return model


def _differences(have: QRAGConfig, want: QRAGConfig) -> dict[str, tuple]:
    """Fields (but ``extra``) where two configs differ: name -> (``have``'s, ``want``'s)."""
    a, b = have.to_dict(), want.to_dict()
    return {k: (a[k], b[k]) for k in b if k not in _MODEL_KEYS_THAT_MAY_DIFFER and a[k] != b[k]}
