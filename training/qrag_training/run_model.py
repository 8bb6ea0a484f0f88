"""The model a training run starts from: a fresh one from the base encoder, another run's
checkpoint (``init_from``), or this run's last checkpoint (resume); and seeding."""

from __future__ import annotations

import random

import numpy as np
import torch

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel

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
    model_config: QRAGConfig, start_from: str | None, resuming: bool, device: torch.device
) -> QRAGModel:
    """The run's model: loaded from ``start_from`` (which must hold the model the config asks
    for, apart from the settings the run sets itself) or built from the base encoder.

    Raises:
        ValueError: ``start_from`` holds a different model than the config describes.
    """
    if not start_from:
        return QRAGModel.from_base(model_config, device=device)
    model = load_model(str(start_from), device=device)
    if not resuming:
        for key in _SETTINGS_TAKEN_FROM_RUN:
            setattr(model.config, key, getattr(model_config, key))
    have, want = model.config.to_dict(), model_config.to_dict()
    diff = {
        k: (have[k], want[k])
        for k in want
        if k not in _MODEL_KEYS_THAT_MAY_DIFFER and have[k] != want[k]
    }
    if diff:
        raise ValueError(
            f"cannot start from {start_from}: the config asks for a different model than it "
            f"holds (field: (checkpoint, config)): {diff}"
        )
    return model
