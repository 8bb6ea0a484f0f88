"""The default model: the packaged general checkpoint, small enough for a wheel, with its own
BM25 fusion depth and a model card written from the benchmark results."""

from __future__ import annotations

import math

import pytest

from qrag_integrations import load_model
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.defaults import GENERAL_CHECKPOINT, default_checkpoint

#: The issue's bound on the default checkpoint's size inside the wheel.
MAX_MB = 50


def test_the_default_is_the_packaged_general_checkpoint() -> None:
    assert default_checkpoint() == "packaged:qrag-general-minilm"
    model = load_model()
    cfg = model.config
    assert cfg.to_dict() == load_model(GENERAL_CHECKPOINT).config.to_dict()
    assert (
        cfg.lexical_depth == 20
        and cfg.lexical_weight == 0.3
        and cfg.lexical_steps == 1
        and cfg.lexical_gap == 0.03
        and cfg.position_mode is PositionMode.DOCUMENT_RELATIVE
        and cfg.rope_theta == 1e8
        and cfg.rope_max_frequency == pytest.approx(math.pi / 18)
        and cfg.normalize
    )
    assert cfg.trainable_layers == 2 and model.embedding_dim == 384


def test_the_checkpoint_fits_a_wheel_and_its_card_holds_the_validation() -> None:
    size = sum(f.stat().st_size for f in GENERAL_CHECKPOINT.rglob("*") if f.is_file())
    assert size < MAX_MB * 2**20
    card = (GENERAL_CHECKPOINT / "README.md").read_text(encoding="utf-8")
    assert "## Validation" in card and "| s64_q1 |" in card and "| dense |" in card
